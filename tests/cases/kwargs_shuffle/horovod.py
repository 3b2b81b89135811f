"""Loader options collected in dicts, the way the PyTorch MNIST example does it."""
import argparse

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, TensorDataset
import horovod.torch as hvd
from torch.utils.data.distributed import DistributedSampler


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--epochs", type=int, default=2)
    args = parser.parse_args()

    hvd.init()
    local_rank = hvd.local_rank()
    if torch.cuda.is_available():
        torch.cuda.set_device(local_rank)

    use_cuda = torch.cuda.is_available()
    device = torch.device("cuda" if use_cuda else "cpu")

    train_kwargs = {"batch_size": args.batch_size}
    test_kwargs = {"batch_size": 1000}
    if use_cuda:
        cuda_kwargs = {"num_workers": 1, "pin_memory": True, "shuffle": True}
        train_kwargs.update(cuda_kwargs)
        test_kwargs.update(cuda_kwargs)

    train_set = TensorDataset(torch.randn(512, 16), torch.randint(0, 4, (512,)))
    test_set = TensorDataset(torch.randn(128, 16), torch.randint(0, 4, (128,)))
    train_loader = DataLoader(train_set, sampler=DistributedSampler(train_set, num_replicas=hvd.size(), rank=hvd.rank(), shuffle=train_kwargs.pop("shuffle", False)), **train_kwargs)
    test_loader = DataLoader(test_set, **test_kwargs)

    model = nn.Linear(16, 4).to(device)
    hvd.broadcast_parameters(model.state_dict(), root_rank=0)  # every rank starts from rank 0's weights
    optimizer = torch.optim.Adadelta(model.parameters(), lr=1.0 * hvd.size())
    optimizer = hvd.DistributedOptimizer(optimizer, named_parameters=model.named_parameters())
    for epoch in range(1, args.epochs + 1):
        train_loader.sampler.set_epoch(epoch)
        model.train()
        for data, target in train_loader:
            data, target = data.to(device), target.to(device)
            optimizer.zero_grad()
            loss = F.cross_entropy(model(data), target)
            loss.backward()
            optimizer.step()
        model.eval()
        correct = 0
        with torch.no_grad():
            for data, target in test_loader:
                data, target = data.to(device), target.to(device)
                correct += (model(data).argmax(dim=1) == target).sum().item()
        if hvd.rank() == 0:
            print(f"epoch {epoch}: accuracy {correct / len(test_set):.3f}")
    hvd.barrier()  # no rank exits while rank 0 still writes its files
    hvd.shutdown()


if __name__ == "__main__":
    main()
