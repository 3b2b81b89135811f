# Evaluation under @torch.inference_mode() between training epochs. Under ZeRO-3 the weights are
# gathered inside the evaluation's forwards, as inference tensors that DeepSpeed may keep for the
# next training forward, which then cannot save them for backward.
import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset


@torch.inference_mode()
def evaluate(model, x, y):
    model.eval()
    loss = nn.functional.mse_loss(model(x), y).item()
    model.train()
    return loss


def main():
    torch.manual_seed(0)
    loader = DataLoader(TensorDataset(torch.randn(256, 8), torch.randn(256, 1)), batch_size=16, shuffle=True)
    val_x, val_y = torch.randn(64, 8), torch.randn(64, 1)
    model = nn.Sequential(nn.Linear(8, 32), nn.ReLU(), nn.Linear(32, 1))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    for epoch in range(2):
        for xb, yb in loader:
            loss = nn.functional.mse_loss(model(xb), yb)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        val_loss = evaluate(model, val_x, val_y)
        print(f"epoch {epoch} val_loss {val_loss:.4f}")


if __name__ == "__main__":
    main()
