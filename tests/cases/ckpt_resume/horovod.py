import argparse

import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset
import horovod.torch as hvd
from torch.utils.data.distributed import DistributedSampler


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 2))

    def forward(self, x):
        return self.body(x)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--epochs", type=int, default=1)
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--resume", default="")
    parser.add_argument("--out", default="ckpt.pt")
    args = parser.parse_args()

    hvd.init()
    local_rank = hvd.local_rank()
    if torch.cuda.is_available():
        torch.cuda.set_device(local_rank)
    torch.manual_seed(0)
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    data = TensorDataset(torch.randn(256, 8), torch.randint(0, 2, (256,)))
    loader = DataLoader(data, batch_size=args.batch_size, sampler=DistributedSampler(data, num_replicas=hvd.size(), rank=hvd.rank(), shuffle=False))
    model = Net().to(device)
    start = 0
    if args.resume:
        state = torch.load(args.resume, map_location=device)
        model.load_state_dict(state["model"])
        start = state["epoch"] + 1
    hvd.broadcast_parameters(model.state_dict(), root_rank=0)  # every rank starts from rank 0's weights
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1 * hvd.size(), momentum=0.9)
    optimizer = hvd.DistributedOptimizer(optimizer, named_parameters=model.named_parameters())
    if args.resume:
        optimizer.load_state_dict(state["optimizer"])
        hvd.broadcast_optimizer_state(optimizer, root_rank=0)  # every rank resumes from rank 0's optimizer state
    for epoch in range(start, start + args.epochs):
        for x, y in loader:
            x, y = x.to(device), y.to(device)
            optimizer.zero_grad()
            loss = nn.functional.cross_entropy(model(x), y)
            loss.backward()
            optimizer.step()
            if hvd.rank() == 0:
                print(f"loss {loss.item():.6f}")
        if hvd.rank() == 0:
            torch.save({"model": model.state_dict(), "optimizer": optimizer.state_dict(), "epoch": epoch}, args.out)
    hvd.barrier()  # no rank exits while rank 0 still writes its files
    hvd.shutdown()


if __name__ == "__main__":
    main()
