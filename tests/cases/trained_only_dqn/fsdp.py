import copy
import os

import torch
import torch.nn as nn
import torch.distributed as dist
from torch.distributed.fsdp import fully_shard

tau = 0.005


class QNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Sequential(nn.Linear(4, 64), nn.ReLU(), nn.Linear(64, 2))

    def forward(self, x):
        return self.fc(x)


def make_optimizer(module, lr):
    return torch.optim.Adam(module.parameters(), lr=lr)


def main():
    # torchrun sets these; plain `python train.py` runs as a single process (port 0: any free one)
    for key, value in dict(RANK="0", LOCAL_RANK="0", WORLD_SIZE="1", MASTER_ADDR="127.0.0.1", MASTER_PORT="0").items():
        os.environ.setdefault(key, value)
    local_rank = int(os.environ["LOCAL_RANK"])
    if torch.cuda.is_available():
        torch.cuda.set_device(local_rank)
    dist.init_process_group("cpu:gloo,cuda:nccl" if torch.cuda.is_available() else "gloo")

    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    model = QNet().to(device)
    target_net = QNet().to(device)
    target_net.load_state_dict(model.state_dict())
    optimizer = make_optimizer(model, 1e-3)
    fully_shard(model)
    for step in range(1000):
        state = torch.randn(32, 4, device=device)
        next_state = torch.randn(32, 4, device=device)
        reward = torch.randn(32, device=device)
        q = model(state).max(1).values
        with torch.no_grad():
            target = reward + 0.99 * target_net(next_state).max(1).values
        loss = nn.functional.smooth_l1_loss(q, target)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        for p, tp in zip(model.parameters(), target_net.parameters()):
            tp.data.copy_(tau * p.data + (1 - tau) * tp.data)
    dist.barrier()  # no rank exits while rank 0 still writes its files
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
