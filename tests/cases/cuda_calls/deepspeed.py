import argparse
import json
import os

import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset
import deepspeed
from torch.utils.data.distributed import DistributedSampler
import torch.distributed as dist


class ConvNet(nn.Module):
    def __init__(self, num_classes=10):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(1, 16, 3, padding=1),
            nn.ReLU(),
            nn.MaxPool2d(2),
            nn.Conv2d(16, 32, 3, padding=1),
            nn.ReLU(),
            nn.MaxPool2d(2),
        )
        self.head = nn.Linear(32 * 7 * 7, num_classes)

    def forward(self, x):
        x = self.features(x)
        return self.head(x.flatten(1))


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--batch-size", type=int, default=100)
    parser.add_argument("--lr", type=float, default=0.01)
    parser.add_argument("--local_rank", "--local-rank", type=int, default=-1, help="set by the deepspeed launcher")
    args = parser.parse_args()

    # the deepspeed launcher sets these; plain `python train.py` runs as a single process (port 0: any free one)
    for key, value in dict(RANK="0", LOCAL_RANK="0", WORLD_SIZE="1", MASTER_ADDR="127.0.0.1", MASTER_PORT="0").items():
        os.environ.setdefault(key, value)
    local_rank = int(os.environ["LOCAL_RANK"])
    if torch.cuda.is_available():
        torch.cuda.set_device(local_rank)
    deepspeed.init_distributed(dist_backend="nccl" if torch.cuda.is_available() else "gloo")
    device = torch.device(f"cuda:{local_rank}" if torch.cuda.is_available() else "cpu")

    # fake 28x28 grayscale images
    images = torch.randn(6000, 1, 28, 28)
    labels = torch.randint(0, 10, (6000,))
    train_dataset = TensorDataset(images, labels)
    loader = DataLoader(train_dataset, batch_size=args.batch_size, sampler=DistributedSampler(train_dataset, shuffle=True))

    model = ConvNet()
    model.to(device)
    criterion = nn.CrossEntropyLoss().to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=0.9)

    # DeepSpeed reads its settings from ds_config.json; the values this script computes itself
    # overwrite the file's, so the two never disagree
    with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "ds_config.json")) as config_file:
        ds_config = json.load(config_file)
    ds_config["train_micro_batch_size_per_gpu"] = args.batch_size
    model, optimizer, _, _ = deepspeed.initialize(model=model, optimizer=optimizer, config=ds_config)

    for epoch in range(args.epochs):
        loader.sampler.set_epoch(epoch)
        for i, (x, y) in enumerate(loader):
            x = x.to(device)
            y = y.to(device)

            out = model(x)
            loss = criterion(out, y)
            model.backward(loss)
            model.step()

            if i % 20 == 0 and dist.get_rank() == 0:
                print(f"epoch {epoch} iter {i} loss {loss.item():.4f}")

    with deepspeed.zero.GatheredParameters(list(model.module.parameters())):  # ZeRO-3 shards the weights: every rank gathers
        model_state = {name: tensor.detach().cpu().clone() for name, tensor in model.module.state_dict().items()}
    if dist.get_rank() == 0:
        torch.save(model_state, "convnet.pt")
    dist.barrier()  # no rank exits while rank 0 still writes its files
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
