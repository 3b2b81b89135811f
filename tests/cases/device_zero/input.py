import argparse

import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset


def get_loader(batch_size):
    # toy sequence data: predict the sum of a random sequence
    seqs = torch.randn(4096, 16, 8)
    targets = seqs.sum(dim=(1, 2)).unsqueeze(-1)
    return DataLoader(TensorDataset(seqs, targets), batch_size=batch_size, shuffle=True)


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

    device = 0  # just use the first GPU

    loader = get_loader(args.bs)
    model = GRURegressor().to(device)
    optimizer = torch.optim.Adam(model.parameters(), lr=args.lr)
    loss_fn = nn.SmoothL1Loss()

    for epoch in range(args.epochs):
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

        print(f"epoch {epoch}: mean loss {sum(losses) / len(losses):.4f}")

    torch.save(model.state_dict(), "gru.pt")


if __name__ == "__main__":
    main()
