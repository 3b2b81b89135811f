import copy
import json
import os

import torch
import torch.nn as nn
import deepspeed
import torch.distributed as dist

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
    # the deepspeed launcher sets these; plain `python train.py` runs as a single process (port 0: any free one)
    for key, value in dict(RANK="0", LOCAL_RANK="0", WORLD_SIZE="1", MASTER_ADDR="127.0.0.1", MASTER_PORT="0").items():
        os.environ.setdefault(key, value)
    local_rank = int(os.environ["LOCAL_RANK"])
    if torch.cuda.is_available():
        torch.cuda.set_device(local_rank)
    deepspeed.init_distributed(dist_backend="nccl" if torch.cuda.is_available() else "gloo")

    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    model = QNet().to(device)
    target_net = QNet().to(device)
    target_net.load_state_dict(model.state_dict())
    optimizer = make_optimizer(model, 1e-3)

    # DeepSpeed reads its settings from ds_config.json
    with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "ds_config.json")) as config_file:
        ds_config = json.load(config_file)
    model, optimizer, _, _ = deepspeed.initialize(model=model, optimizer=optimizer, config=ds_config)
    for step in range(1000):
        state = torch.randn(32, 4, device=device)
        next_state = torch.randn(32, 4, device=device)
        reward = torch.randn(32, device=device)
        q = model(state).max(1).values
        with torch.no_grad():
            target = reward + 0.99 * target_net(next_state).max(1).values
        loss = nn.functional.smooth_l1_loss(q, target)
        model.backward(loss)
        model.step()
        for p, tp in zip(model.parameters(), target_net.parameters()):
            tp.data.copy_(tau * p.data + (1 - tau) * tp.data)
    dist.barrier()  # no rank exits while rank 0 still writes its files
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
