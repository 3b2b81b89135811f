"""Settings in a dict literal passed to main(): `settings["batch_size"]` is 16 in the config, and
the script's own entry overwrites it at run time."""
import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset


def main(settings):
    dataset = TensorDataset(torch.randn(512, 8), torch.randn(512, 1))
    loader = DataLoader(dataset, batch_size=settings["batch_size"], shuffle=True)
    model = nn.Linear(8, 1)
    optimizer = torch.optim.AdamW(model.parameters(), lr=settings["learning_rate"])
    for epoch in range(settings["num_epochs"]):
        for x, y in loader:
            loss = nn.functional.mse_loss(model(x), y)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
    torch.save(model.state_dict(), "settings.pt")


if __name__ == "__main__":
    SETTINGS = {
        "learning_rate": 5e-4,
        "num_epochs": 3,
        "batch_size": 16,
    }
    main(SETTINGS)
