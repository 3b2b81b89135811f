"""A regression on a small table that is fetched as a zip archive, from a mirror when the first
address fails, then turned into train.csv (the shape of a download with a fallback)."""
import os
import urllib.error
import urllib.request
import zipfile
from pathlib import Path
import json

import torch
import torch.nn as nn

# the script keeps its model and batches on the CPU, so DeepSpeed does too (it picks its device
# when imported); move them to a GPU to train there
os.environ.setdefault("DS_ACCELERATOR", "cpu")
import deepspeed
from torch.utils.data.distributed import DistributedSampler
import torch.distributed as dist

URL = os.environ.get("TABLE_URL", "https://example.org/table.zip")
MIRROR = os.environ.get("TABLE_MIRROR", "https://mirror.example.org/table.zip")
RAW = Path("table") / "rows.txt"


def fetch(url, archive, ready):
    if ready.exists():
        print(f"{ready} is there already")
        return
    with urllib.request.urlopen(url, timeout=30) as response:
        payload = response.read()
    with open(archive, "wb") as out:
        out.write(payload)
    with zipfile.ZipFile(archive) as packed:
        packed.extractall("unpacked")
    os.rename(Path("unpacked") / "rows", ready)


def make_csvs(ready):
    with open(ready) as f:
        lines = [line.strip() for line in f if line.strip()]
    with open("train.csv", "w") as f:
        f.write("\n".join(lines[1:]) + "\n")


def main():
    # the deepspeed launcher sets these; plain `python train.py` runs as a single process (port 0: any free one)
    for key, value in dict(RANK="0", LOCAL_RANK="0", WORLD_SIZE="1", MASTER_ADDR="127.0.0.1", MASTER_PORT="0").items():
        os.environ.setdefault(key, value)
    local_rank = int(os.environ["LOCAL_RANK"])
    if torch.cuda.is_available():
        torch.cuda.set_device(local_rank)
    deepspeed.init_distributed(dist_backend="gloo")

    os.makedirs("table", exist_ok=True)
    have_all = all(Path(name).exists() for name in ["train.csv"])
    if local_rank == 0:
        if not have_all:
            try:
                fetch(URL, "table.zip", RAW)
            except urllib.error.URLError as error:
                print(f"first address failed ({error}); trying the mirror")
                fetch(MIRROR, "table.zip", RAW)
            make_csvs(RAW)
    dist.barrier()  # one download per node; the other ranks wait for its files

    with open("train.csv") as f:
        rows = [[float(v) for v in line.split(",")] for line in f if line.strip()]
    data = torch.tensor(rows)
    dataset = torch.utils.data.TensorDataset(data[:, :3], data[:, 3:])
    loader = torch.utils.data.DataLoader(dataset, batch_size=4, sampler=DistributedSampler(dataset, shuffle=True))
    model = nn.Linear(3, 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05)

    # DeepSpeed reads its settings from ds_config.json
    with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "ds_config.json")) as config_file:
        ds_config = json.load(config_file)
    model, optimizer, _, _ = deepspeed.initialize(model=model, optimizer=optimizer, config=ds_config)
    for epoch in range(2):
        loader.sampler.set_epoch(epoch)
        for x, y in loader:
            loss = nn.functional.mse_loss(model(x), y)
            model.backward(loss)
            model.step()
        if dist.get_rank() == 0:
            print(f"epoch {epoch} loss {loss.item():.4f}")
    dist.barrier()  # no rank exits while rank 0 still writes its files
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
