import argparse

import torch
import torch.nn.functional as F
from torch.utils.data import DataLoader, TensorDataset

from nets import Decoder

VOCABULARY = 50


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--batch-size", type=int, default=16)
    args = parser.parse_args()

    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    tokens = torch.randint(0, VOCABULARY, (512, 17))
    loader = DataLoader(TensorDataset(tokens[:, :-1], tokens[:, 1:]), batch_size=args.batch_size, shuffle=True)

    model = Decoder(VOCABULARY).to(device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-4)

    for epoch in range(args.epochs):
        for inputs, targets in loader:
            inputs, targets = inputs.to(device), targets.to(device)
            logits = model(inputs)
            loss = F.cross_entropy(logits.reshape(-1, VOCABULARY), targets.reshape(-1))
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        print(f"epoch {epoch} loss {loss.item():.3f}")

    model.eval()
    print(model.complete(tokens[:1, :4].to(device), steps=8))
    torch.save(model.state_dict(), "decoder.pt")


if __name__ == "__main__":
    main()
