import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset

from evaluate import count, evaluate


class Net(nn.Module):
    def __init__(self, n_classes):
        super().__init__()
        self.n_classes = n_classes
        self.fc = nn.Linear(8, n_classes)

    def forward(self, x):
        return self.fc(x)


def main():
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    data = TensorDataset(torch.randn(64, 8), torch.randint(0, 3, (64,)))
    loader = DataLoader(data, batch_size=16, shuffle=True)
    model = Net(3).to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    print("parameters:", count(model))
    for epoch in range(2):
        for x, y in loader:
            x, y = x.to(device), y.to(device)
            optimizer.zero_grad()
            loss = nn.functional.cross_entropy(model(x), y)
            loss.backward()
            optimizer.step()
        accuracy = evaluate(model, loader, device=device)
        print(epoch, accuracy)


if __name__ == "__main__":
    main()
