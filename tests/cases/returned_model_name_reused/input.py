"""A regressor trained in `fit()`, which hands the trained network back; the caller saves it, then
binds the same name to a fresh network and loads the saved weights into it."""

import torch
import torch.nn as nn

SETTINGS = {"width": 16, "epochs": 2, "lr": 0.05}


class Regressor(nn.Module):
    def __init__(self, width):
        super().__init__()
        self.body = nn.Sequential(nn.Linear(4, width), nn.ReLU(), nn.Linear(width, 1))

    def forward(self, x):
        return self.body(x)


def fit(settings):
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    features = torch.randn(64, 4)
    dataset = torch.utils.data.TensorDataset(features, features.sum(dim=1, keepdim=True))
    loader = torch.utils.data.DataLoader(dataset, batch_size=8, shuffle=True)
    model = Regressor(settings["width"]).to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=settings["lr"])
    history = []
    for epoch in range(settings["epochs"]):
        total = 0.0
        for x, y in loader:
            x, y = x.to(device), y.to(device)
            optimizer.zero_grad()
            loss = nn.functional.mse_loss(model(x), y)
            loss.backward()
            optimizer.step()
            total += loss.item()
        history.append(total / len(loader))
        print(f"epoch {epoch}: {history[-1]:.4f}")
    return history, model


if __name__ == "__main__":
    history, model = fit(SETTINGS)
    print("losses:", history)

    torch.save(model.state_dict(), "regressor.pt")
    model = Regressor(SETTINGS["width"])
    model.load_state_dict(torch.load("regressor.pt", weights_only=True))
    model.eval()
    with torch.no_grad():
        print("prediction:", model(torch.ones(1, 4)).item())
