# A train/validation split drawn before any seed: each rank would draw its own split.
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset, random_split
import horovod.torch as hvd
from torch.utils.data.distributed import DistributedSampler


def main():
    hvd.init()
    local_rank = hvd.local_rank()
    if torch.cuda.is_available():
        torch.cuda.set_device(local_rank)

    dataset = TensorDataset(torch.randn(100, 4), torch.randn(100, 1))
    train_set, valid_set = random_split(dataset, [80, 20], generator=torch.Generator().manual_seed(0))
    loader = DataLoader(train_set, batch_size=8, sampler=DistributedSampler(train_set, num_replicas=hvd.size(), rank=hvd.rank(), shuffle=True))
    valid_loader = DataLoader(valid_set, batch_size=20)
    model = nn.Linear(4, 1)
    hvd.broadcast_parameters(model.state_dict(), root_rank=0)  # every rank starts from rank 0's weights
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1 * hvd.size())
    optimizer = hvd.DistributedOptimizer(optimizer, named_parameters=model.named_parameters())
    for epoch in range(2):
        loader.sampler.set_epoch(epoch)
        for x, y in loader:
            loss = nn.functional.mse_loss(model(x), y)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        with torch.no_grad():
            valid = sum(nn.functional.mse_loss(model(x), y).item() for x, y in valid_loader)
        if hvd.rank() == 0:
            print(f"epoch {epoch}: valid {valid:.4f}")
    hvd.barrier()  # no rank exits while rank 0 still writes its files
    hvd.shutdown()


if __name__ == "__main__":
    main()
