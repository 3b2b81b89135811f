import json
import os
import numpy as np
import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset
import deepspeed
from torch.utils.data.distributed import DistributedSampler
import torch.distributed as dist


def train_epoch(model, loader, opt, device):
    model.train()
    losses = []
    for x, y in loader:
        x, y = x.to(device), y.to(device)
        loss = nn.functional.mse_loss(model(x), y)
        model.backward(loss)
        model.step()
        losses.append(loss.item())
    return np.mean(losses)


def main():
    # the deepspeed launcher sets these; plain `python train.py` runs as a single process (port 0: any free one)
    for key, value in dict(RANK="0", LOCAL_RANK="0", WORLD_SIZE="1", MASTER_ADDR="127.0.0.1", MASTER_PORT="0").items():
        os.environ.setdefault(key, value)
    local_rank = int(os.environ["LOCAL_RANK"])
    if torch.cuda.is_available():
        torch.cuda.set_device(local_rank)
    deepspeed.init_distributed(dist_backend="nccl" if torch.cuda.is_available() else "gloo")

    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    data = TensorDataset(torch.randn(64, 8), torch.randn(64, 1))
    loader = DataLoader(data, batch_size=8, sampler=DistributedSampler(data, shuffle=True))
    model = nn.Linear(8, 1).to(device)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    scheduler = torch.optim.lr_scheduler.ReduceLROnPlateau(opt, patience=1)

    # DeepSpeed reads its settings from ds_config.json
    with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "ds_config.json")) as config_file:
        ds_config = json.load(config_file)
    model, opt, _, _ = deepspeed.initialize(model=model, optimizer=opt, config=ds_config)
    best = float("inf")
    for epoch in range(6):
        loader.sampler.set_epoch(epoch)
        mean_loss = train_epoch(model, loader, opt, device)
        # what train_epoch returned covers this rank's batches only: the mean over every rank
        shared = torch.tensor(mean_loss, dtype=torch.float64, device="cuda" if torch.cuda.is_available() else "cpu")
        dist.all_reduce(shared)
        mean_loss = shared.item() / dist.get_world_size()
        scheduler.step(mean_loss)
        if dist.get_rank() == 0:
            print(f"epoch {epoch} loss {mean_loss:.4f} lr {opt.param_groups[0]['lr']}")
        if mean_loss < best:
            with deepspeed.zero.GatheredParameters(list(model.module.parameters())):  # ZeRO-3 shards the weights: every rank gathers
                model_state = {name: tensor.detach().cpu().clone() for name, tensor in model.module.state_dict().items()}
            if dist.get_rank() == 0:
                torch.save(model_state, "ckpt.pt")
            best = mean_loss
    dist.barrier()  # no rank exits while rank 0 still writes its files
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
