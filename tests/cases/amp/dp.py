import argparse

import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset


class TinyTransformer(nn.Module):
    def __init__(self, vocab=1000, d_model=128, n_classes=5):
        super().__init__()
        self.emb = nn.Embedding(vocab, d_model)
        layer = nn.TransformerEncoderLayer(d_model, nhead=4, batch_first=True)
        self.encoder = nn.TransformerEncoder(layer, num_layers=2)
        self.cls = nn.Linear(d_model, n_classes)

    def forward(self, tokens):
        h = self.encoder(self.emb(tokens))
        return self.cls(h.mean(dim=1))


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--epochs", type=int, default=4)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--lr", type=float, default=5e-4)
    args = parser.parse_args()

    device = torch.device("cuda")

    tokens = torch.randint(0, 1000, (4000, 64))
    labels = torch.randint(0, 5, (4000,))
    loader = DataLoader(TensorDataset(tokens, labels), batch_size=args.batch_size, shuffle=True)

    model = TinyTransformer().to(device)
    model = nn.DataParallel(model)  # splits each batch across the GPUs
    optimizer = torch.optim.AdamW(model.parameters(), lr=args.lr)
    criterion = nn.CrossEntropyLoss()
    scaler = torch.cuda.amp.GradScaler()

    for epoch in range(args.epochs):
        for batch_idx, (tok, lab) in enumerate(loader):
            tok, lab = tok.to(device), lab.to(device)
            optimizer.zero_grad(set_to_none=True)

            # mixed precision forward pass
            with torch.autocast("cuda"):
                logits = model(tok)
                loss = criterion(logits, lab)

            scaler.scale(loss).backward()
            scaler.step(optimizer)
            scaler.update()

            if batch_idx % 25 == 0:
                print(f"epoch {epoch} batch {batch_idx} loss {loss.item():.4f} scale {scaler.get_scale():.0f}")

    torch.save(model.module.state_dict(), "tiny_transformer_amp.pt")


if __name__ == "__main__":
    main()
