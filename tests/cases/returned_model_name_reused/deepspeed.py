"""A regressor trained in `fit()`, which hands the trained network back; the caller saves it, then
binds the same name to a fresh network and loads the saved weights into it."""
import json
import os

import torch
import torch.nn as nn
import deepspeed
from torch.utils.data.distributed import DistributedSampler
import torch.distributed as dist

SETTINGS = {"width": 16, "epochs": 2, "lr": 0.05}


class Regressor(nn.Module):
    def __init__(self, width):
        super().__init__()
        self.body = nn.Sequential(nn.Linear(4, width), nn.ReLU(), nn.Linear(width, 1))

    def forward(self, x):
        return self.body(x)


def fit(settings):
    # the deepspeed launcher sets these; plain `python train.py` runs as a single process (port 0: any free one)
    for key, value in dict(RANK="0", LOCAL_RANK="0", WORLD_SIZE="1", MASTER_ADDR="127.0.0.1", MASTER_PORT="0").items():
        os.environ.setdefault(key, value)
    local_rank = int(os.environ["LOCAL_RANK"])
    if torch.cuda.is_available():
        torch.cuda.set_device(local_rank)
    deepspeed.init_distributed(dist_backend="nccl" if torch.cuda.is_available() else "gloo")

    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    features = torch.randn(64, 4)
    dataset = torch.utils.data.TensorDataset(features, features.sum(dim=1, keepdim=True))
    loader = torch.utils.data.DataLoader(dataset, batch_size=8, sampler=DistributedSampler(dataset, shuffle=True))
    model = Regressor(settings["width"]).to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=settings["lr"])

    # DeepSpeed reads its settings from ds_config.json
    with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "ds_config.json")) as config_file:
        ds_config = json.load(config_file)
    model, optimizer, _, _ = deepspeed.initialize(model=model, optimizer=optimizer, config=ds_config)
    history = []
    for epoch in range(settings["epochs"]):
        loader.sampler.set_epoch(epoch)
        total = 0.0
        for x, y in loader:
            x, y = x.to(device), y.to(device)
            loss = nn.functional.mse_loss(model(x), y)
            model.backward(loss)
            model.step()
            total += loss.item()
        history.append(total / len(loader))
        if dist.get_rank() == 0:
            print(f"epoch {epoch}: {history[-1]:.4f}")
    return history, model


if __name__ == "__main__":
    history, model = fit(SETTINGS)
    if os.environ.get("RANK", "0") == "0":
        print("losses:", history)

    with deepspeed.zero.GatheredParameters(list(model.module.parameters())):  # ZeRO-3 shards the weights: every rank gathers
        model_state = {name: tensor.detach().cpu().clone() for name, tensor in model.module.state_dict().items()}
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
