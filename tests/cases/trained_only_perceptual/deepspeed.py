import json
import os
import torch
import torch.nn as nn
import torchvision
import deepspeed
import torch.distributed as dist


class Generator(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Conv2d(3, 16, 3, padding=1), nn.ReLU(), nn.Conv2d(16, 3, 3, padding=1))

    def forward(self, x):
        return self.net(x)


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
    generator = Generator().to(device)
    vgg = torchvision.models.vgg16(weights="DEFAULT").features[:16].to(device)
    for p in vgg.parameters():
        p.requires_grad_(False)
    optimizer = make_optimizer(generator, 1e-4)

    # DeepSpeed reads its settings from ds_config.json
    with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "ds_config.json")) as config_file:
        ds_config = json.load(config_file)
    generator, optimizer, _, _ = deepspeed.initialize(model=generator, optimizer=optimizer, config=ds_config)
    for step in range(100):
        x = torch.randn(8, 3, 64, 64, device=device)
        y = generator(x)
        with torch.no_grad():
            target_features = vgg(x)
        loss = nn.functional.mse_loss(vgg(y), target_features)
        generator.backward(loss)
        generator.step()
    dist.barrier()  # no rank exits while rank 0 still writes its files
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
