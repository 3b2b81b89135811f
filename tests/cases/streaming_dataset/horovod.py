"""Pretraining on streamed data: the datasets have no length, so no sampler can index them."""
import torch
import torch.nn as nn
from datasets import load_dataset
from torch.utils.data import DataLoader, IterableDataset
import horovod.torch as hvd


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
    hvd.init()
    local_rank = hvd.local_rank()
    if torch.cuda.is_available():
        torch.cuda.set_device(local_rank)

    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    model = nn.Linear(8, 1).to(device)
    hvd.broadcast_parameters(model.state_dict(), root_rank=0)  # every rank starts from rank 0's weights
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    optimizer = hvd.DistributedOptimizer(optimizer, named_parameters=model.named_parameters())
    train(model, ShuffledLineStream("train.txt"), optimizer, device)

    web = load_dataset("allenai/c4", "en", split="train", streaming=True)
    web = web.shuffle(seed=0).with_format("torch")
    for batch in DataLoader(web, batch_size=8):
        loss = model(batch["features"].to(device)).pow(2).mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    if hvd.rank() == 0:
        torch.save(model.state_dict(), "streamed.pt")
    hvd.barrier()  # no rank exits while rank 0 still writes its files
    hvd.shutdown()


if __name__ == "__main__":
    main()
