"""Pretraining on streamed data: the datasets have no length, so no sampler can index them."""
import os
import torch
import torch.nn as nn
from datasets import load_dataset
from torch.utils.data import DataLoader, IterableDataset
import torch.distributed as dist
from torch.distributed.fsdp import fully_shard
from torch.distributed.checkpoint.state_dict import get_model_state_dict, StateDictOptions


class LineStream(IterableDataset):
    def __init__(self, path):
        self.path = path

    def __iter__(self):
        with open(self.path) as lines:
            for line in lines:
                yield torch.tensor([float(v) for v in line.split()[:8]])


class ShuffledLineStream(LineStream):
    pass


def train(model, dataset, optimizer, device):
    loader = DataLoader(dataset, batch_size=16)
    for step, batch in enumerate(loader):
        batch = batch.to(device)
        loss = model(batch).pow(2).mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()


def main():
    # torchrun sets these; plain `python train.py` runs as a single process (port 0: any free one)
    for key, value in dict(RANK="0", LOCAL_RANK="0", WORLD_SIZE="1", MASTER_ADDR="127.0.0.1", MASTER_PORT="0").items():
        os.environ.setdefault(key, value)
    local_rank = int(os.environ["LOCAL_RANK"])
    if torch.cuda.is_available():
        torch.cuda.set_device(local_rank)
    dist.init_process_group("cpu:gloo,cuda:nccl" if torch.cuda.is_available() else "gloo")

    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    model = nn.Linear(8, 1).to(device)
    fully_shard(model)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    train(model, ShuffledLineStream("train.txt"), optimizer, device)

    web = load_dataset("allenai/c4", "en", split="train", streaming=True)
    web = web.shuffle(seed=0).with_format("torch")
    for batch in DataLoader(web, batch_size=8):
        loss = model(batch["features"].to(device)).pow(2).mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    model_state = get_model_state_dict(model, options=StateDictOptions(full_state_dict=True, cpu_offload=True))  # every rank gathers; rank 0 gets the full weights
    if dist.get_rank() == 0:
        torch.save(model_state, "streamed.pt")
    dist.barrier()  # no rank exits while rank 0 still writes its files
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
