"""Plain-text logs: a CSV appended every epoch, loss curves rewritten whole, predictions dumped."""
import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset
import horovod.torch as hvd
from torch.utils.data.distributed import DistributedSampler


def main():
    hvd.init()
    local_rank = hvd.local_rank()
    if torch.cuda.is_available():
        torch.cuda.set_device(local_rank)

    data = TensorDataset(torch.randn(200, 5), torch.randn(200, 1))
    loader = DataLoader(data, batch_size=20, sampler=DistributedSampler(data, num_replicas=hvd.size(), rank=hvd.rank(), shuffle=True))
    model = nn.Linear(5, 1)
    hvd.broadcast_parameters(model.state_dict(), root_rank=0)  # every rank starts from rank 0's weights
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05 * hvd.size())
    optimizer = hvd.DistributedOptimizer(optimizer, named_parameters=model.named_parameters())

    if hvd.rank() == 0:
        log = open("train_log.csv", "w")
        log.write("epoch,loss\n")
    losses = []
    for epoch in range(4):
        loader.sampler.set_epoch(epoch)
        for x, y in loader:
            loss = nn.functional.mse_loss(model(x), y)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        losses.append(loss.item())
        if hvd.rank() == 0:
            log.write(f"{epoch},{loss.item():.5f}\n")
            log.flush()

        if hvd.rank() == 0:
            f = open("losses.txt", "w")
            f.write(str(losses))
            f.close()
    if hvd.rank() == 0:
        log.close()

    if hvd.rank() == 0:
        with open("predictions.txt", mode="w") as out:
            for x, _ in loader:
                out.write(f"{model(x).mean().item():.4f}\n")
    hvd.barrier()  # no rank exits while rank 0 still writes its files
    hvd.shutdown()


if __name__ == "__main__":
    main()
