"""A regressor wrapped in nn.DataParallel whose helpers, nested in main(), read the module
through `.module`: one defined before the wrap, one after it, and a lambda."""
import os

import torch
import torch.nn as nn
import torch.distributed as dist
from torch.distributed.fsdp import fully_shard
from torch.distributed.device_mesh import init_device_mesh
from torch.utils.data.distributed import DistributedSampler
from torch.distributed.checkpoint.state_dict import get_model_state_dict, StateDictOptions


class Regressor(nn.Module):
    def __init__(self, features, outputs):
        super().__init__()
        self.trunk = nn.Linear(features, 16)
        self.head = nn.Linear(16, outputs)
        self.outputs = outputs

    def forward(self, x):
        return self.head(torch.relu(self.trunk(x)))


def main():
    # torchrun sets these; plain `python train.py` runs as a single process (port 0: any free one)
    for key, value in dict(RANK="0", LOCAL_RANK="0", WORLD_SIZE="1", MASTER_ADDR="127.0.0.1", MASTER_PORT="0").items():
        os.environ.setdefault(key, value)
    local_rank = int(os.environ["LOCAL_RANK"])
    if torch.cuda.is_available():
        torch.cuda.set_device(local_rank)
    dist.init_process_group("cpu:gloo,cuda:nccl" if torch.cuda.is_available() else "gloo")

    net = Regressor(6, 3)
    samples = torch.utils.data.TensorDataset(torch.randn(96, 6), torch.randn(96, 3))
    batches = torch.utils.data.DataLoader(samples, batch_size=12, sampler=DistributedSampler(samples, shuffle=True))
    # FSDP2: sharded before the optimizer is built, so that it holds the sharded parameters
    # sharded on the device the script keeps the model on (FSDP2's default is the GPU, when there is one)
    device_mesh = init_device_mesh(next(net.parameters()).device.type, (dist.get_world_size(),))
    fully_shard(net, mesh=device_mesh)
    opt = torch.optim.Adam(net.parameters(), lr=1e-3)

    def checkpoint(path):
        net_state = get_model_state_dict(net, options=StateDictOptions(full_state_dict=True, cpu_offload=True))  # every rank gathers; rank 0 gets the full weights
        if dist.get_rank() == 0:
            torch.save({"weights": net_state, "outputs": net.outputs}, path)


    def report(epoch, total):
        if dist.get_rank() == 0:
            print(f"epoch {epoch}: loss {total:.4f} over {net.outputs} outputs")

    width = lambda: net.head.out_features
    for epoch in range(3):
        batches.sampler.set_epoch(epoch)
        total = 0.0
        for inputs, targets in batches:
            opt.zero_grad()
            loss = nn.functional.mse_loss(net(inputs), targets)
            loss.backward()
            opt.step()
            total += loss.item()
        report(epoch, total)
        checkpoint("regressor.pt")
    if dist.get_rank() == 0:
        print("head width", width())
    dist.barrier()  # no rank exits while rank 0 still writes its files
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
