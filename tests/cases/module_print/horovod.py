import argparse
import os

import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset
import horovod.torch as hvd
from torch.utils.data.distributed import DistributedSampler

try:
    from sklearn.metrics import r2_score
except ImportError:
    r2_score = None
    if os.environ.get("HOROVOD_RANK", "0") == "0":
        print("scikit-learn is not installed: R^2 is not reported (pip install scikit-learn)")

CONFIG = {"hidden": 32, "lr": 0.05, "epochs": 3}
if os.environ.get("HOROVOD_RANK", "0") == "0":
    print("config:", CONFIG)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--batch-size", type=int, default=32)
    args = parser.parse_args()

    hvd.init()
    local_rank = hvd.local_rank()
    if torch.cuda.is_available():
        torch.cuda.set_device(local_rank)

    x = torch.randn(512, 6)
    y = x @ torch.randn(6, 1) + 0.1 * torch.randn(512, 1)
    train_dataset = TensorDataset(x, y)
    loader = DataLoader(train_dataset, batch_size=args.batch_size, sampler=DistributedSampler(train_dataset, num_replicas=hvd.size(), rank=hvd.rank(), shuffle=True))
    model = nn.Sequential(nn.Linear(6, CONFIG["hidden"]), nn.ReLU(), nn.Linear(CONFIG["hidden"], 1))
    hvd.broadcast_parameters(model.state_dict(), root_rank=0)  # every rank starts from rank 0's weights
    optimizer = torch.optim.SGD(model.parameters(), lr=CONFIG["lr"] * hvd.size())
    optimizer = hvd.DistributedOptimizer(optimizer, named_parameters=model.named_parameters())

    for epoch in range(CONFIG["epochs"]):
        loader.sampler.set_epoch(epoch)
        for xb, yb in loader:
            loss = nn.functional.mse_loss(model(xb), yb)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        if hvd.rank() == 0:
            print(f"epoch {epoch}: loss {loss.item():.4f}")

    if r2_score is not None:
        with torch.no_grad():
            predicted = model(x)
        if hvd.rank() == 0:
            print("R^2:", r2_score(y.numpy(), predicted.numpy()))
    hvd.barrier()  # no rank exits while rank 0 still writes its files
    hvd.shutdown()


if __name__ == "__main__":
    main()
