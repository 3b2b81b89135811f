import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset

# hyper-parameters
BATCH_SIZE = 64
LR = 3e-4
EPOCHS = 10
HIDDEN = 256
CHECKPOINT_PATH = "mlp.pt"


def make_dataset(n=20000, dim=64, n_classes=10):
    x = torch.randn(n, dim)
    y = torch.randint(0, n_classes, (n,))
    return TensorDataset(x, y)


def build_model(dim=64, n_classes=10):
    return nn.Sequential(
        nn.Linear(dim, HIDDEN),
        nn.GELU(),
        nn.Dropout(0.1),
        nn.Linear(HIDDEN, n_classes),
    )


def main():
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")

    train_loader = DataLoader(make_dataset(), batch_size=BATCH_SIZE, shuffle=True)
    model = build_model().to(device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=LR, weight_decay=0.01)
    loss_fn = nn.CrossEntropyLoss()

    for epoch in range(EPOCHS):
        model.train()
        epoch_loss = 0.0
        for xb, yb in train_loader:
            xb, yb = xb.to(device), yb.to(device)
            optimizer.zero_grad()
            loss = loss_fn(model(xb), yb)
            loss.backward()
            optimizer.step()
            epoch_loss += loss.item() * xb.size(0)

        epoch_loss /= len(train_loader.dataset)
        print(f"epoch {epoch + 1:02d} | loss {epoch_loss:.4f}")

    torch.save(model.state_dict(), CHECKPOINT_PATH)
    print("saved to", CHECKPOINT_PATH)


if __name__ == "__main__":
    main()
