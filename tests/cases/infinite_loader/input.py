import torch
from torch.utils.data import DataLoader, TensorDataset

def infinite(loader):
    while True:
        for batch in loader:
            yield batch

def main():
    ds = TensorDataset(torch.randn(64, 3), torch.randn(64, 1))
    loader = DataLoader(ds, batch_size=8, shuffle=True)
    model = torch.nn.Linear(3, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    batches = infinite(loader)
    for it in range(100):
        x, y = next(batches)
        loss = ((model(x) - y) ** 2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
    torch.save(model.state_dict(), "m.pt")

if __name__ == "__main__":
    main()
