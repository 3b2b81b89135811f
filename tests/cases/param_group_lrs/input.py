"""Fine-tuning with a slower backbone: two parameter groups, each with its own learning rate."""

import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset

BASE_LR = 0.05


def build_model():
    backbone = nn.Sequential(nn.Linear(8, 16), nn.ReLU())
    head = nn.Linear(16, 3)
    return nn.Sequential(backbone, head)


def main():
    model = build_model()
    data = TensorDataset(torch.randn(96, 8), torch.randint(0, 3, (96,)))
    loader = DataLoader(data, batch_size=12, shuffle=True)
    optimizer = torch.optim.SGD(
        [
            {"params": model[0].parameters(), "lr": BASE_LR * 0.1},
            {"params": model[1].parameters(), "lr": BASE_LR},
        ],
        lr=BASE_LR,
        momentum=0.9,
    )
    scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=2, gamma=0.5)
    for epoch in range(4):
        for features, labels in loader:
            optimizer.zero_grad()
            loss = nn.functional.cross_entropy(model(features), labels)
            loss.backward()
            optimizer.step()
        scheduler.step()
        print(f"epoch {epoch} lr {scheduler.get_last_lr()}")


if __name__ == "__main__":
    main()
