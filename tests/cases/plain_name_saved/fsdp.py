"""The network is built under one name and trained under another; checkpoints save the first name."""
import os
import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset
import torch.distributed as dist
from torch.distributed.fsdp import fully_shard
from torch.distributed.device_mesh import init_device_mesh
from torch.utils.data.distributed import DistributedSampler
from torch.distributed.checkpoint.state_dict import get_model_state_dict, StateDictOptions


def main():
    # torchrun sets these; plain `python train.py` runs as a single process (port 0: any free one)
    for key, value in dict(RANK="0", LOCAL_RANK="0", WORLD_SIZE="1", MASTER_ADDR="127.0.0.1", MASTER_PORT="0").items():
        os.environ.setdefault(key, value)
    local_rank = int(os.environ["LOCAL_RANK"])
    if torch.cuda.is_available():
        torch.cuda.set_device(local_rank)
    dist.init_process_group("cpu:gloo,cuda:nccl" if torch.cuda.is_available() else "gloo")
    device = torch.device(f"cuda:{local_rank}" if torch.cuda.is_available() else "cpu")

    detector = nn.Sequential(nn.Conv1d(3, 8, 3, padding=1), nn.ReLU(), nn.Flatten(), nn.Linear(8 * 20, 4))
    net = detector
    if torch.cuda.is_available():
        net = detector.to(device)
    # sharded on the device the script keeps the model on (FSDP2's default is the GPU, when there is one)
    device_mesh = init_device_mesh(next(net.parameters()).device.type, (dist.get_world_size(),))
    fully_shard(net, mesh=device_mesh)
    optimizer = torch.optim.SGD(net.parameters(), lr=1e-3, momentum=0.9)
    train_dataset = TensorDataset(torch.randn(160, 3, 20), torch.randn(160, 4))
    loader = DataLoader(train_dataset, batch_size=8, sampler=DistributedSampler(train_dataset, shuffle=True))
    for iteration, (signals, boxes) in enumerate(loader):
        optimizer.zero_grad()
        loss = nn.functional.smooth_l1_loss(net(signals), boxes)
        loss.backward()
        optimizer.step()
        if iteration % 10 == 0:
            detector_state = get_model_state_dict(detector, options=StateDictOptions(full_state_dict=True, cpu_offload=True))  # every rank gathers; rank 0 gets the full weights
            if dist.get_rank() == 0:
                torch.save(detector_state, f"detector_{iteration}.pth")
    detector_state = get_model_state_dict(detector, options=StateDictOptions(full_state_dict=True, cpu_offload=True))  # every rank gathers; rank 0 gets the full weights
    if dist.get_rank() == 0:
        torch.save(detector_state, "detector_final.pth")
    dist.barrier()  # no rank exits while rank 0 still writes its files
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
