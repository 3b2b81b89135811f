import argparse
import os

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, TensorDataset
import torch.distributed as dist
from torch.distributed.fsdp import fully_shard
from torch.utils.data.distributed import DistributedSampler
from torch.distributed.checkpoint.state_dict import get_model_state_dict, StateDictOptions


class ResidualMLP(nn.Module):
    def __init__(self, dim=128, depth=4, n_classes=10):
        super().__init__()
        self.inp = nn.Linear(64, dim)
        self.blocks = nn.ModuleList([nn.Linear(dim, dim) for _ in range(depth)])
        self.norm = nn.LayerNorm(dim)
        self.out = nn.Linear(dim, n_classes)

    def forward(self, x):
        h = self.inp(x)
        for block in self.blocks:
            h = h + F.gelu(block(h))
        return self.out(self.norm(h))


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--epochs", type=int, default=10)
    parser.add_argument("--batch-size", type=int, default=256)
    parser.add_argument("--lr", type=float, default=1e-3)
    args = parser.parse_args()

    # torchrun sets these; plain `python train.py` runs as a single process (port 0: any free one)
    for key, value in dict(RANK="0", LOCAL_RANK="0", WORLD_SIZE="1", MASTER_ADDR="127.0.0.1", MASTER_PORT="0").items():
        os.environ.setdefault(key, value)
    local_rank = int(os.environ["LOCAL_RANK"])
    if torch.cuda.is_available():
        torch.cuda.set_device(local_rank)
    dist.init_process_group("cpu:gloo,cuda:nccl" if torch.cuda.is_available() else "gloo")

    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")

    x = torch.randn(50000, 64)
    y = torch.randint(0, 10, (50000,))
    train_dataset = TensorDataset(x, y)
    train_loader = DataLoader(train_dataset, batch_size=args.batch_size, sampler=DistributedSampler(train_dataset, shuffle=True), drop_last=True)

    model = ResidualMLP().to(device)
    for submodule in model.modules():  # each block's weights are gathered only while it runs
        if isinstance(submodule, torch.nn.Linear):
            fully_shard(submodule)
    fully_shard(model)
    # compile for speed (PyTorch 2.x)
    model = torch.compile(model)
    optimizer = torch.optim.AdamW(model.parameters(), lr=args.lr)

    for epoch in range(args.epochs):
        train_loader.sampler.set_epoch(epoch)
        total_loss = 0.0
        for inputs, labels in train_loader:
            inputs, labels = inputs.to(device, non_blocking=True), labels.to(device, non_blocking=True)

            optimizer.zero_grad(set_to_none=True)
            loss = F.cross_entropy(model(inputs), labels)
            loss.backward()
            optimizer.step()
            total_loss += loss.item()
        # the epoch's figures over every rank's batches, not only this rank's share
        figures = torch.tensor([total_loss], dtype=torch.float64)
        dist.all_reduce(figures)
        total_loss = figures[0].item() / dist.get_world_size()  # the ranks' mean, as it is divided by len(loader)

        if dist.get_rank() == 0:
            print(f"epoch {epoch}: loss {total_loss / len(train_loader):.4f}")

    model_state = get_model_state_dict(model, options=StateDictOptions(full_state_dict=True, cpu_offload=True))  # every rank gathers; rank 0 gets the full weights
    if dist.get_rank() == 0:
        torch.save(model_state, "resmlp_compiled.pt")
    dist.barrier()  # no rank exits while rank 0 still writes its files
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
