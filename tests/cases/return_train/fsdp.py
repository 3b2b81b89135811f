# main() parses the command line, then returns what training returns: the group must outlive it.
import argparse
import os
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset
import torch.distributed as dist
from torch.distributed.fsdp import fully_shard
from torch.distributed.device_mesh import init_device_mesh
from torch.utils.data.distributed import DistributedSampler


def train(args):
    model = nn.Linear(4, 1)
    # sharded on the device the script keeps the model on (FSDP2's default is the GPU, when there is one)
    device_mesh = init_device_mesh(next(model.parameters()).device.type, (dist.get_world_size(),))
    fully_shard(model, mesh=device_mesh)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    train_dataset = TensorDataset(torch.randn(32, 4), torch.randn(32, 1))
    loader = DataLoader(train_dataset, batch_size=8, sampler=DistributedSampler(train_dataset, shuffle=True))
    for epoch in range(args.epochs):
        loader.sampler.set_epoch(epoch)
        for x, y in loader:
            loss = nn.functional.mse_loss(model(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
    if dist.get_rank() == 0:
        print("done")
    return loss.item()


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--epochs", type=int, default=2)
    args = parser.parse_args()

    # torchrun sets these; plain `python train.py` runs as a single process (port 0: any free one)
    for key, value in dict(RANK="0", LOCAL_RANK="0", WORLD_SIZE="1", MASTER_ADDR="127.0.0.1", MASTER_PORT="0").items():
        os.environ.setdefault(key, value)
    local_rank = int(os.environ["LOCAL_RANK"])
    if torch.cuda.is_available():
        torch.cuda.set_device(local_rank)
    dist.init_process_group("cpu:gloo,cuda:nccl" if torch.cuda.is_available() else "gloo")
    result = train(args)
    dist.barrier()  # no rank exits while rank 0 still writes its files
    dist.destroy_process_group()
    return result


if __name__ == "__main__":
    main()
