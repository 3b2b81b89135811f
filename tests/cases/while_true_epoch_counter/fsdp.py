"""Training that runs until a number of iterations, not epochs: an endless `while True` whose
passes are counted by hand (`passes += 1`) before each sweep over the loader."""
import os

import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset
import torch.distributed as dist
from torch.distributed.fsdp import fully_shard
from torch.distributed.device_mesh import init_device_mesh
from torch.utils.data.distributed import DistributedSampler
from torch.distributed.checkpoint.state_dict import get_model_state_dict, StateDictOptions

TOTAL_ITERATIONS = 30


def main():
    # torchrun sets these; plain `python train.py` runs as a single process (port 0: any free one)
    for key, value in dict(RANK="0", LOCAL_RANK="0", WORLD_SIZE="1", MASTER_ADDR="127.0.0.1", MASTER_PORT="0").items():
        os.environ.setdefault(key, value)
    local_rank = int(os.environ["LOCAL_RANK"])
    if torch.cuda.is_available():
        torch.cuda.set_device(local_rank)
    dist.init_process_group("cpu:gloo,cuda:nccl" if torch.cuda.is_available() else "gloo")

    torch.manual_seed(0)
    net = nn.Sequential(nn.Linear(6, 12), nn.Tanh(), nn.Linear(12, 2))
    # sharded on the device the script keeps the model on (FSDP2's default is the GPU, when there is one)
    device_mesh = init_device_mesh(next(net.parameters()).device.type, (dist.get_world_size(),))
    fully_shard(net, mesh=device_mesh)
    sgd = torch.optim.SGD(net.parameters(), lr=0.05)
    samples = TensorDataset(torch.randn(80, 6), torch.randn(80, 2))
    batches = DataLoader(samples, batch_size=10, sampler=DistributedSampler(samples, shuffle=True))
    passes, iterations = 0, 0
    while True:
        passes += 1
        batches.sampler.set_epoch(passes)
        for inputs, targets in batches:
            iterations += 1
            sgd.zero_grad()
            error = nn.functional.mse_loss(net(inputs), targets)
            error.backward()
            sgd.step()
            if iterations >= TOTAL_ITERATIONS:
                break
        if dist.get_rank() == 0:
            print(f"pass {passes}: {iterations} iterations, last error {error.item():.4f}")
        if iterations >= TOTAL_ITERATIONS:
            break
    net_state = get_model_state_dict(net, options=StateDictOptions(full_state_dict=True, cpu_offload=True))  # every rank gathers; rank 0 gets the full weights
    if dist.get_rank() == 0:
        torch.save(net_state, "net.pt")
    dist.barrier()  # no rank exits while rank 0 still writes its files
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
