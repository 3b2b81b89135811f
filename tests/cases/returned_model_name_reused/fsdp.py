"""A regressor trained in `fit()`, which hands the trained network back; the caller saves it, then
binds the same name to a fresh network and loads the saved weights into it."""
import os

import torch
import torch.nn as nn
import torch.distributed as dist
from torch.distributed.fsdp import fully_shard
from torch.utils.data.distributed import DistributedSampler
from torch.distributed.checkpoint.state_dict import get_model_state_dict, StateDictOptions

SETTINGS = {"width": 16, "epochs": 2, "lr": 0.05}


class Regressor(nn.Module):
    def __init__(self, width):
        super().__init__()
        self.body = nn.Sequential(nn.Linear(4, width), nn.ReLU(), nn.Linear(width, 1))

    def forward(self, x):
        return self.body(x)


def fit(settings):
    # torchrun sets these; plain `python train.py` runs as a single process (port 0: any free one)
    for key, value in dict(RANK="0", LOCAL_RANK="0", WORLD_SIZE="1", MASTER_ADDR="127.0.0.1", MASTER_PORT="0").items():
        os.environ.setdefault(key, value)
    local_rank = int(os.environ["LOCAL_RANK"])
    if torch.cuda.is_available():
        torch.cuda.set_device(local_rank)
    dist.init_process_group("cpu:gloo,cuda:nccl" if torch.cuda.is_available() else "gloo")

    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    features = torch.randn(64, 4)
    dataset = torch.utils.data.TensorDataset(features, features.sum(dim=1, keepdim=True))
    loader = torch.utils.data.DataLoader(dataset, batch_size=8, sampler=DistributedSampler(dataset, shuffle=True))
    model = Regressor(settings["width"]).to(device)
    fully_shard(model)
    optimizer = torch.optim.SGD(model.parameters(), lr=settings["lr"])
    history = []
    for epoch in range(settings["epochs"]):
        loader.sampler.set_epoch(epoch)
        total = 0.0
        for x, y in loader:
            x, y = x.to(device), y.to(device)
            optimizer.zero_grad()
            loss = nn.functional.mse_loss(model(x), y)
            loss.backward()
            optimizer.step()
            total += loss.item()
        history.append(total / len(loader))
        if dist.get_rank() == 0:
            print(f"epoch {epoch}: {history[-1]:.4f}")
    return history, model


if __name__ == "__main__":
    history, model = fit(SETTINGS)
    if os.environ.get("RANK", "0") == "0":
        print("losses:", history)

    model_state = get_model_state_dict(model, options=StateDictOptions(full_state_dict=True, cpu_offload=True))  # every rank gathers; rank 0 gets the full weights
    if os.environ.get("RANK", "0") == "0":
        torch.save(model_state, "regressor.pt")
    model = Regressor(SETTINGS["width"])
    if os.environ.get("RANK", "0") == "0":
        model.load_state_dict(torch.load("regressor.pt", weights_only=True, map_location=torch.device(f"cuda:{os.environ.get('LOCAL_RANK', '0')}" if torch.cuda.is_available() else "cpu")))
        model.eval()
        with torch.no_grad():
            print("prediction:", model(torch.ones(1, 4)).item())
    dist.barrier()  # no rank exits while rank 0 still writes its files
    dist.destroy_process_group()
