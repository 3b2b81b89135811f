"""Fine-tuning with a slow optimizer for the pretrained body and a fast one for the new head."""
import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset


def main():
    samples = TensorDataset(torch.randn(512, 20), torch.randint(0, 3, (512,)))
    loader = DataLoader(samples, batch_size=16, shuffle=True)

    model = nn.Sequential(nn.Linear(20, 64), nn.ReLU(), nn.Linear(64, 3))
    body_optimizer = torch.optim.SGD(model[0].parameters(), lr=1e-3, momentum=0.9)
    head_optimizer = torch.optim.Adam(model[2].parameters(), lr=1e-2)

    for epoch in range(5):
        for features, labels in loader:
            body_optimizer.zero_grad()
            head_optimizer.zero_grad()
            loss = nn.functional.cross_entropy(model(features), labels)
            loss.backward()
            body_optimizer.step()
            head_optimizer.step()

    torch.save(model.state_dict(), "finetuned.pt")


if __name__ == "__main__":
    main()
