"""Weights averaged into a torch AveragedModel built before training (stochastic weight averaging)."""
import os
import torch
import torch.nn as nn
from torch.optim.swa_utils import AveragedModel
from torch.utils.data import DataLoader, TensorDataset
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data.distributed import DistributedSampler


def main():
    # torchrun sets these; plain `python train.py` runs as a single process (port 0: any free one)
    for key, value in dict(RANK="0", LOCAL_RANK="0", WORLD_SIZE="1", MASTER_ADDR="127.0.0.1", MASTER_PORT="0").items():
        os.environ.setdefault(key, value)
    local_rank = int(os.environ["LOCAL_RANK"])
    if torch.cuda.is_available():
        torch.cuda.set_device(local_rank)
    dist.init_process_group("cpu:gloo,cuda:nccl" if torch.cuda.is_available() else "gloo")

    data = TensorDataset(torch.randn(512, 12), torch.randn(512, 1))
    loader = DataLoader(data, batch_size=32, sampler=DistributedSampler(data, shuffle=True))
    model = nn.Sequential(nn.Linear(12, 48), nn.ReLU(), nn.Linear(48, 1))
    model = DDP(model)
    averaged = AveragedModel(model)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
    for epoch in range(10):
        loader.sampler.set_epoch(epoch)
        for x, y in loader:
            loss = nn.functional.mse_loss(model(x), y)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        if epoch >= 5:
            averaged.update_parameters(model)
    if dist.get_rank() == 0:
        torch.save(averaged.module.state_dict(), "averaged.pt")
    dist.barrier()  # no rank exits while rank 0 still writes its files
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
