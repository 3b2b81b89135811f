"""Pretraining on streamed data: the datasets have no length, so no sampler can index them."""
import torch
import torch.nn as nn
from datasets import load_dataset
from torch.utils.data import DataLoader, IterableDataset


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
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    model = nn.Linear(8, 1).to(device)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    train(model, ShuffledLineStream("train.txt"), optimizer, device)

    web = load_dataset("allenai/c4", "en", split="train", streaming=True)
    web = web.shuffle(seed=0).with_format("torch")
    for batch in DataLoader(web, batch_size=8):
        loss = model(batch["features"].to(device)).pow(2).mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    torch.save(model.state_dict(), "streamed.pt")


if __name__ == "__main__":
    main()
