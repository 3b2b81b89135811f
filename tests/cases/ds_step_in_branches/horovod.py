"""Two optimizer steps in the two branches of an `if` on the step's parity (a warm-up branch that
also clips): every micro-step steps, so there is no accumulation window to follow."""
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

    model = nn.Linear(4, 2)
    hvd.broadcast_parameters(model.state_dict(), root_rank=0)  # every rank starts from rank 0's weights
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1 * hvd.size())
    optimizer = hvd.DistributedOptimizer(optimizer, named_parameters=model.named_parameters())
    train_dataset = TensorDataset(torch.randn(64, 4), torch.randn(64, 2))
    loader = DataLoader(train_dataset, batch_size=8, sampler=DistributedSampler(train_dataset, num_replicas=hvd.size(), rank=hvd.rank(), shuffle=True))
    for epoch in range(2):
        loader.sampler.set_epoch(epoch)
        for i, (x, y) in enumerate(loader):
            loss = nn.functional.mse_loss(model(x), y)
            optimizer.zero_grad()
            loss.backward()
            if i % 2 == 0:
                optimizer.step()
            else:
                optimizer.synchronize()  # average the gradients across ranks before they are read
                torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
                with optimizer.skip_synchronize():
                    optimizer.step()
        if hvd.rank() == 0:
            print(f"epoch {epoch} loss {loss.item():.4f}")
    hvd.barrier()  # no rank exits while rank 0 still writes its files
    hvd.shutdown()


if __name__ == "__main__":
    main()
