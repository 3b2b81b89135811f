import json
import os
import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset

# the script keeps its model and batches on the CPU, so DeepSpeed does too (it picks its device
# when imported); move them to a GPU to train there
os.environ.setdefault("DS_ACCELERATOR", "cpu")
import deepspeed
from torch.utils.data.distributed import DistributedSampler
import torch.distributed as dist


class SmallConvNet(nn.Module):
    def __init__(self, classes=4):
        super().__init__()
        self.features = nn.Sequential(nn.Conv2d(1, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(), nn.AdaptiveAvgPool2d(1))
        self.head = nn.Linear(8, classes)

    def forward(self, x):
        return self.head(self.features(x).flatten(1))


def accuracy(net, loader):
    net.eval()
    right = 0
    with torch.no_grad():
        for x, y in loader:
            right += (net(x).argmax(1) == y).sum().item()
    net.train()
    return right / len(loader.dataset)


def main():
    # the deepspeed launcher sets these; plain `python train.py` runs as a single process (port 0: any free one)
    for key, value in dict(RANK="0", LOCAL_RANK="0", WORLD_SIZE="1", MASTER_ADDR="127.0.0.1", MASTER_PORT="0").items():
        os.environ.setdefault(key, value)
    local_rank = int(os.environ["LOCAL_RANK"])
    if torch.cuda.is_available():
        torch.cuda.set_device(local_rank)
    deepspeed.init_distributed(dist_backend="gloo")

    images, labels = torch.randn(96, 1, 8, 8), torch.randint(0, 4, (96,))
    train_dataset = TensorDataset(images[:64], labels[:64])
    train_loader = DataLoader(train_dataset, batch_size=8, sampler=DistributedSampler(train_dataset, shuffle=True))
    held_out = DataLoader(TensorDataset(images[64:], labels[64:]), batch_size=16)
    net = SmallConvNet()
    optimizer = torch.optim.SGD(net.parameters(), lr=0.05)

    # DeepSpeed reads its settings from ds_config.json
    with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "ds_config.json")) as config_file:
        ds_config = json.load(config_file)
    net, optimizer, _, _ = deepspeed.initialize(model=net, optimizer=optimizer, config=ds_config)
    best = 0.0
    for epoch in range(3):
        train_loader.sampler.set_epoch(epoch)
        for x, y in train_loader:
            net.backward(nn.functional.cross_entropy(net(x), y))
            net.step()
        score = accuracy(net, held_out)
        if score > best:
            best = score
            with deepspeed.zero.GatheredParameters(list(net.module.parameters())):  # ZeRO-3 shards the weights: every rank gathers
                net_state = {name: tensor.detach().cpu().clone() for name, tensor in net.module.state_dict().items()}
            if dist.get_rank() == 0:
                torch.save(net_state, "best.pt")
    dist.barrier()  # no rank exits while rank 0 still writes its files
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
