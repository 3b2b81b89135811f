import argparse
import os

import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset
import torch.distributed as dist
from torch.distributed.fsdp import fully_shard
from torch.utils.data.distributed import DistributedSampler
from torch.distributed.checkpoint.state_dict import get_model_state_dict, StateDictOptions


def get_loader(batch_size):
    # toy sequence data: predict the sum of a random sequence
    seqs = torch.randn(4096, 16, 8)
    targets = seqs.sum(dim=(1, 2)).unsqueeze(-1)
    train_dataset = TensorDataset(seqs, targets)
    return DataLoader(train_dataset, batch_size=batch_size, sampler=DistributedSampler(train_dataset, shuffle=True))


class GRURegressor(nn.Module):
    def __init__(self, input_size=8, hidden_size=64):
        super().__init__()
        self.rnn = nn.GRU(input_size, hidden_size, batch_first=True)
        self.out = nn.Linear(hidden_size, 1)

    def forward(self, x):
        _, h = self.rnn(x)
        return self.out(h[-1])


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--epochs", type=int, default=8)
    parser.add_argument("--bs", type=int, default=32)
    parser.add_argument("--lr", type=float, default=1e-3)
    args = parser.parse_args()

    # torchrun sets these; plain `python train.py` runs as a single process (port 0: any free one)
    for key, value in dict(RANK="0", LOCAL_RANK="0", WORLD_SIZE="1", MASTER_ADDR="127.0.0.1", MASTER_PORT="0").items():
        os.environ.setdefault(key, value)
    local_rank = int(os.environ["LOCAL_RANK"])
    if torch.cuda.is_available():
        torch.cuda.set_device(local_rank)
    dist.init_process_group("cpu:gloo,cuda:nccl" if torch.cuda.is_available() else "gloo")

    device = local_rank if torch.cuda.is_available() else "cpu"  # just use the first GPU

    loader = get_loader(args.bs)
    model = GRURegressor().to(device)
    fully_shard(model)
    optimizer = torch.optim.Adam(model.parameters(), lr=args.lr)
    loss_fn = nn.SmoothL1Loss()

    for epoch in range(args.epochs):
        loader.sampler.set_epoch(epoch)
        losses = []
        for seq, target in loader:
            seq = seq.to(device)
            target = target.to(device)

            pred = model(seq)
            loss = loss_fn(pred, target)

            optimizer.zero_grad()
            loss.backward()
            nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            optimizer.step()
            losses.append(loss.item())

        if dist.get_rank() == 0:
            print(f"epoch {epoch}: mean loss {sum(losses) / len(losses):.4f}")

    model_state = get_model_state_dict(model, options=StateDictOptions(full_state_dict=True, cpu_offload=True))  # every rank gathers; rank 0 gets the full weights
    if dist.get_rank() == 0:
        torch.save(model_state, "gru.pt")
    dist.barrier()  # no rank exits while rank 0 still writes its files
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
