"""Fine-tunes the head of a small network while its first layer stays fixed: only `model[0]` is
frozen, so the rest of the model still trains and DDP has parameters to average."""
import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset


def main():
    features = torch.randn(256, 12)
    labels = torch.randint(0, 3, (256,))
    loader = DataLoader(TensorDataset(features, labels), batch_size=32, shuffle=True)

    model = nn.Sequential(nn.Linear(12, 24), nn.ReLU(), nn.Linear(24, 3))
    for p in model[0].parameters():
        p.requires_grad = False
    optimizer = torch.optim.SGD([p for p in model.parameters() if p.requires_grad], lr=0.05)

    for epoch in range(2):
        for x, y in loader:
            loss = nn.functional.cross_entropy(model(x), y)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        print(f"epoch {epoch}: loss {loss.item():.4f}")
    torch.save(model.state_dict(), "head_tuned.pt")


if __name__ == "__main__":
    main()
