"""The training loader comes from the project's data module; only the validation loader is built here."""
import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset

from data import build_train_loader
import horovod.torch as hvd


def evaluate(model, loader):
    model.eval()
    with torch.no_grad():
        losses = [nn.functional.mse_loss(model(x), y).item() for x, y in loader]
    model.train()
    return sum(losses) / len(losses)


def main():
    hvd.init()
    local_rank = hvd.local_rank()
    if torch.cuda.is_available():
        torch.cuda.set_device(local_rank)

    model = nn.Linear(6, 1)
    hvd.broadcast_parameters(model.state_dict(), root_rank=0)  # every rank starts from rank 0's weights
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    optimizer = hvd.DistributedOptimizer(optimizer, named_parameters=model.named_parameters())
    train_loader = build_train_loader(batch_size=32)
    val_loader = DataLoader(TensorDataset(torch.randn(64, 6), torch.randn(64, 1)), batch_size=64)
    for epoch in range(5):
        for x, y in train_loader:
            loss = nn.functional.mse_loss(model(x), y)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        if hvd.rank() == 0:
            print(f"epoch {epoch}: val loss {evaluate(model, val_loader):.4f}")
    if hvd.rank() == 0:
        torch.save(model.state_dict(), "elsewhere.pt")
    hvd.barrier()  # no rank exits while rank 0 still writes its files
    hvd.shutdown()


if __name__ == "__main__":
    main()
