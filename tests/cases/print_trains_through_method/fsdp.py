"""Each epoch trains through a method of the script's own class, called inside the print that
reports it: every rank must still run it (its backward all-reduces)."""
import os

import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset
import torch.distributed as dist
from torch.distributed.fsdp import fully_shard
from torch.distributed.device_mesh import init_device_mesh
from torch.utils.data.distributed import DistributedSampler


class Fitter:
    def __init__(self, model):
        self.model = model
        # sharded on the device the script keeps the model on (FSDP2's default is the GPU, when there is one)
        device_mesh = init_device_mesh(next(self.model.parameters()).device.type, (dist.get_world_size(),))
        fully_shard(self.model, mesh=device_mesh)
        self.opt = torch.optim.SGD(model.parameters(), lr=0.1)
        train_dataset = TensorDataset(torch.randn(32, 4), torch.randn(32, 1))
        self.batches = DataLoader(train_dataset, batch_size=8, sampler=DistributedSampler(train_dataset, shuffle=True))

    def one_pass(self):
        total = 0.0
        for x, y in self.batches:
            self.opt.zero_grad()
            loss = nn.functional.mse_loss(self.model(x), y)
            loss.backward()
            self.opt.step()
            total += loss.item()
        return total


def main():
    # torchrun sets these; plain `python train.py` runs as a single process (port 0: any free one)
    for key, value in dict(RANK="0", LOCAL_RANK="0", WORLD_SIZE="1", MASTER_ADDR="127.0.0.1", MASTER_PORT="0").items():
        os.environ.setdefault(key, value)
    local_rank = int(os.environ["LOCAL_RANK"])
    if torch.cuda.is_available():
        torch.cuda.set_device(local_rank)
    dist.init_process_group("cpu:gloo,cuda:nccl" if torch.cuda.is_available() else "gloo")

    fitter = Fitter(nn.Linear(4, 1))
    for epoch in range(3):
        message = fitter.one_pass()  # computed on every rank: it may run the model
        if dist.get_rank() == 0:
            print(epoch, message)
    dist.barrier()  # no rank exits while rank 0 still writes its files
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
