"""Resumes from a checkpoint through a helper that builds a new optimizer and loads its state."""

import argparse
import sys

import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset
import horovod.torch as hvd
from torch.utils.data.distributed import DistributedSampler


def load_checkpoint(net, path):
    saved = torch.load(path, map_location=torch.device(f"cuda:{hvd.local_rank()}" if torch.cuda.is_available() else "cpu"))
    net.load_state_dict(saved["weights"])
    fresh = torch.optim.Adam(net.parameters(), lr=2e-4 * hvd.size())
    fresh.load_state_dict(saved["optimizer"])
    return fresh


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--resume", default="")
    parser.add_argument("--epochs", type=int, default=2)
    args = parser.parse_args()

    hvd.init()
    local_rank = hvd.local_rank()
    if torch.cuda.is_available():
        torch.cuda.set_device(local_rank)

    generator = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 16))
    gen_opt = torch.optim.Adam(generator.parameters(), lr=2e-4 * hvd.size())
    gen_opt = hvd.DistributedOptimizer(gen_opt, named_parameters=generator.named_parameters())
    if args.resume:
        gen_opt.set_backward_passes_per_step(sys.maxsize)  # the replaced optimizer keeps its Horovod hooks: they never all-reduce again
        gen_opt = load_checkpoint(generator, args.resume)
        gen_opt = hvd.DistributedOptimizer(gen_opt, named_parameters=generator.named_parameters())
        hvd.broadcast_optimizer_state(gen_opt, root_rank=0)  # every rank resumes from rank 0's optimizer state
    hvd.broadcast_parameters(generator.state_dict(), root_rank=0)  # every rank starts from rank 0's weights
    train_dataset = TensorDataset(torch.randn(256, 16))
    loader = DataLoader(train_dataset, batch_size=32, sampler=DistributedSampler(train_dataset, num_replicas=hvd.size(), rank=hvd.rank(), shuffle=True))
    for epoch in range(args.epochs):
        loader.sampler.set_epoch(epoch)
        for (noise,) in loader:
            gen_opt.zero_grad()
            loss = generator(noise).pow(2).mean()
            loss.backward()
            gen_opt.step()
        if hvd.rank() == 0:
            print("epoch", epoch, "loss", loss.item())
    if hvd.rank() == 0:
        torch.save({"weights": generator.state_dict(), "optimizer": gen_opt.state_dict()}, "checkpoint.pt")
    hvd.barrier()  # no rank exits while rank 0 still writes its files
    hvd.shutdown()


if __name__ == "__main__":
    main()
