"""Sequence classifier; the GPU is picked by number (--gpu), the way many research scripts do."""
import argparse

import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset

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

    if torch.cuda.is_available():
        torch.cuda.set_device(args.gpu)
    device = torch.device("cuda", args.gpu)
    use_amp = device.type == "cuda"

    tokens = torch.randint(0, 1000, (1024, 12))
    labels = torch.randint(0, 4, (1024,))
    loader = DataLoader(TensorDataset(tokens, labels), batch_size=64 * NUM_GPUS, shuffle=True)
    model = Classifier(1000, 4).to(device)
    if args.resume:
        model.load_state_dict(torch.load(args.resume, map_location="cuda:0"))
    model = nn.DataParallel(model)  # splits each batch across the GPUs
    criterion = nn.CrossEntropyLoss(weight=torch.ones(4)).cuda(args.gpu)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)

    for epoch in range(args.epochs):
        for x, y in loader:
            x, y = x.to(device), y.to(device)
            with torch.autocast(device_type=AMP_DEVICE_TYPE, dtype=torch.bfloat16, enabled=use_amp):
                loss = criterion(model(x), y)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        print(f"epoch {epoch} loss {loss.item():.3f}")
    torch.save(model.module.state_dict(), "classifier.pt")


if __name__ == "__main__":
    main()
