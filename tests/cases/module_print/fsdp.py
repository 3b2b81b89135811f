import argparse
import os

import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset
import torch.distributed as dist
from torch.distributed.fsdp import fully_shard
from torch.distributed.device_mesh import init_device_mesh
from torch.utils.data.distributed import DistributedSampler

try:
    from sklearn.metrics import r2_score
except ImportError:
    r2_score = None
    if os.environ.get("RANK", "0") == "0":
        print("scikit-learn is not installed: R^2 is not reported (pip install scikit-learn)")

CONFIG = {"hidden": 32, "lr": 0.05, "epochs": 3}
if os.environ.get("RANK", "0") == "0":
    print("config:", CONFIG)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--batch-size", type=int, default=32)
    args = parser.parse_args()

    # torchrun sets these; plain `python train.py` runs as a single process (port 0: any free one)
    for key, value in dict(RANK="0", LOCAL_RANK="0", WORLD_SIZE="1", MASTER_ADDR="127.0.0.1", MASTER_PORT="0").items():
        os.environ.setdefault(key, value)
    local_rank = int(os.environ["LOCAL_RANK"])
    if torch.cuda.is_available():
        torch.cuda.set_device(local_rank)
    dist.init_process_group("cpu:gloo,cuda:nccl" if torch.cuda.is_available() else "gloo")

    x = torch.randn(512, 6)
    y = x @ torch.randn(6, 1) + 0.1 * torch.randn(512, 1)
    train_dataset = TensorDataset(x, y)
    loader = DataLoader(train_dataset, batch_size=args.batch_size, sampler=DistributedSampler(train_dataset, shuffle=True))
    model = nn.Sequential(nn.Linear(6, CONFIG["hidden"]), nn.ReLU(), nn.Linear(CONFIG["hidden"], 1))
    # sharded on the device the script keeps the model on (FSDP2's default is the GPU, when there is one)
    device_mesh = init_device_mesh(next(model.parameters()).device.type, (dist.get_world_size(),))
    fully_shard(model, mesh=device_mesh)
    optimizer = torch.optim.SGD(model.parameters(), lr=CONFIG["lr"])

    for epoch in range(CONFIG["epochs"]):
        loader.sampler.set_epoch(epoch)
        for xb, yb in loader:
            loss = nn.functional.mse_loss(model(xb), yb)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        if dist.get_rank() == 0:
            print(f"epoch {epoch}: loss {loss.item():.4f}")

    if r2_score is not None:
        with torch.no_grad():
            predicted = model(x)
        if dist.get_rank() == 0:
            print("R^2:", r2_score(y.numpy(), predicted.numpy()))
    dist.barrier()  # no rank exits while rank 0 still writes its files
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
