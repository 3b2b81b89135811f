"""Plain-text logs: a CSV appended every epoch, loss curves rewritten whole, predictions dumped."""
import os
import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset
import torch.distributed as dist
from torch.distributed.fsdp import fully_shard
from torch.distributed.device_mesh import init_device_mesh
from torch.utils.data.distributed import DistributedSampler


def main():
    # torchrun sets these; plain `python train.py` runs as a single process (port 0: any free one)
    for key, value in dict(RANK="0", LOCAL_RANK="0", WORLD_SIZE="1", MASTER_ADDR="127.0.0.1", MASTER_PORT="0").items():
        os.environ.setdefault(key, value)
    local_rank = int(os.environ["LOCAL_RANK"])
    if torch.cuda.is_available():
        torch.cuda.set_device(local_rank)
    dist.init_process_group("cpu:gloo,cuda:nccl" if torch.cuda.is_available() else "gloo")

    data = TensorDataset(torch.randn(200, 5), torch.randn(200, 1))
    loader = DataLoader(data, batch_size=20, sampler=DistributedSampler(data, shuffle=True))
    model = nn.Linear(5, 1)
    # sharded on the device the script keeps the model on (FSDP2's default is the GPU, when there is one)
    device_mesh = init_device_mesh(next(model.parameters()).device.type, (dist.get_world_size(),))
    fully_shard(model, mesh=device_mesh)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05)

    if dist.get_rank() == 0:
        log = open("train_log.csv", "w")
        log.write("epoch,loss\n")
    losses = []
    for epoch in range(4):
        loader.sampler.set_epoch(epoch)
        for x, y in loader:
            loss = nn.functional.mse_loss(model(x), y)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        losses.append(loss.item())
        if dist.get_rank() == 0:
            log.write(f"{epoch},{loss.item():.5f}\n")
            log.flush()

        if dist.get_rank() == 0:
            f = open("losses.txt", "w")
            f.write(str(losses))
            f.close()
    if dist.get_rank() == 0:
        log.close()

    with open("predictions.txt", mode="w") as out:
        for x, _ in loader:
            out.write(f"{model(x).mean().item():.4f}\n")
    dist.barrier()  # no rank exits while rank 0 still writes its files
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
