import copy

import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(8, 2)

    def forward(self, x):
        return self.fc(x)


def main():
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    data = TensorDataset(torch.randn(64, 8), torch.randint(0, 2, (64,)))
    loader = DataLoader(data, batch_size=16, shuffle=True)
    model = Net().to(device)
    eval_model = copy.deepcopy(model)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for epoch in range(2):
        model.train()
        for x, y in loader:
            x, y = x.to(device), y.to(device)
            optimizer.zero_grad()
            loss = nn.functional.cross_entropy(model(x), y)
            loss.backward()
            optimizer.step()
        eval_model.load_state_dict(model.state_dict())
        eval_model.eval()
        with torch.no_grad():
            correct = 0
            for x, y in loader:
                x, y = x.to(device), y.to(device)
                correct += (eval_model(x).argmax(1) == y).sum().item()
        print(epoch, correct)


if __name__ == "__main__":
    main()
