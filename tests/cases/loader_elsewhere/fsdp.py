"""The training loader comes from the project's data module; only the validation loader is built here."""
import os
import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset

from data import build_train_loader
import torch.distributed as dist
from torch.distributed.fsdp import fully_shard
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.checkpoint.state_dict import get_model_state_dict, StateDictOptions


def evaluate(model, loader):
    model.eval()
    with torch.no_grad():
        losses = [nn.functional.mse_loss(model(x), y).item() for x, y in loader]
    model.train()
    return sum(losses) / len(losses)


def main():
    # torchrun sets these; plain `python train.py` runs as a single process (port 0: any free one)
    for key, value in dict(RANK="0", LOCAL_RANK="0", WORLD_SIZE="1", MASTER_ADDR="127.0.0.1", MASTER_PORT="0").items():
        os.environ.setdefault(key, value)
    local_rank = int(os.environ["LOCAL_RANK"])
    if torch.cuda.is_available():
        torch.cuda.set_device(local_rank)
    dist.init_process_group("cpu:gloo,cuda:nccl" if torch.cuda.is_available() else "gloo")

    model = nn.Linear(6, 1)
    # sharded on the device the script keeps the model on (FSDP2's default is the GPU, when there is one)
    device_mesh = init_device_mesh(next(model.parameters()).device.type, (dist.get_world_size(),))
    fully_shard(model, mesh=device_mesh)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    train_loader = build_train_loader(batch_size=32)
    val_loader = DataLoader(TensorDataset(torch.randn(64, 6), torch.randn(64, 1)), batch_size=64)
    for epoch in range(5):
        for x, y in train_loader:
            loss = nn.functional.mse_loss(model(x), y)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        message = f"epoch {epoch}: val loss {evaluate(model, val_loader):.4f}"  # computed on every rank: it may run the model
        if dist.get_rank() == 0:
            print(message)
    model_state = get_model_state_dict(model, options=StateDictOptions(full_state_dict=True, cpu_offload=True))  # every rank gathers; rank 0 gets the full weights
    if dist.get_rank() == 0:
        torch.save(model_state, "elsewhere.pt")
    dist.barrier()  # no rank exits while rank 0 still writes its files
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
