"""Sequence classifier; the GPU is picked by number (--gpu), the way many research scripts do."""
import argparse
import os

import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset
import torch.distributed as dist
from torch.distributed.fsdp import fully_shard
from torch.utils.data.distributed import DistributedSampler
from torch.distributed.checkpoint.state_dict import get_model_state_dict, StateDictOptions

AMP_DEVICE_TYPE = "cuda"  # autocast's device_type, not a device
NUM_GPUS = 1


class Classifier(nn.Module):
    def __init__(self, vocab, classes):
        super().__init__()
        self.embed = nn.EmbeddingBag(vocab, 64)
        self.head = nn.Linear(64, classes)

    def forward(self, tokens):
        return self.head(self.embed(tokens))


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--gpu", type=int, default=0)
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--resume", default="")
    args = parser.parse_args()

    # torchrun sets these; plain `python train.py` runs as a single process (port 0: any free one)
    for key, value in dict(RANK="0", LOCAL_RANK="0", WORLD_SIZE="1", MASTER_ADDR="127.0.0.1", MASTER_PORT="0").items():
        os.environ.setdefault(key, value)
    local_rank = int(os.environ["LOCAL_RANK"])
    if torch.cuda.is_available():
        torch.cuda.set_device(local_rank)
    dist.init_process_group("cpu:gloo,cuda:nccl" if torch.cuda.is_available() else "gloo")

    device = torch.device(f"cuda:{local_rank}" if torch.cuda.is_available() else "cpu")
    use_amp = device.type == "cuda"

    tokens = torch.randint(0, 1000, (1024, 12))
    labels = torch.randint(0, 4, (1024,))
    train_dataset = TensorDataset(tokens, labels)
    loader = DataLoader(train_dataset, batch_size=64 * NUM_GPUS, sampler=DistributedSampler(train_dataset, shuffle=True))
    model = Classifier(1000, 4).to(device)
    if args.resume:
        model.load_state_dict(torch.load(args.resume, map_location=device))
    fully_shard(model)
    criterion = nn.CrossEntropyLoss(weight=torch.ones(4)).to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)

    for epoch in range(args.epochs):
        loader.sampler.set_epoch(epoch)
        for x, y in loader:
            x, y = x.to(device), y.to(device)
            with torch.autocast(device_type=AMP_DEVICE_TYPE, dtype=torch.bfloat16, enabled=use_amp):
                loss = criterion(model(x), y)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        if dist.get_rank() == 0:
            print(f"epoch {epoch} loss {loss.item():.3f}")
    model_state = get_model_state_dict(model, options=StateDictOptions(full_state_dict=True, cpu_offload=True))  # every rank gathers; rank 0 gets the full weights
    if dist.get_rank() == 0:
        torch.save(model_state, "classifier.pt")
    dist.barrier()  # no rank exits while rank 0 still writes its files
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
