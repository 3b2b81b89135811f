import argparse
import json
import os

import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset
import deepspeed
from torch.utils.data.distributed import DistributedSampler
import torch.distributed as dist

device = torch.device("cuda" if torch.cuda.is_available() else "cpu")


class MLPClassifier(nn.Module):
    def __init__(self, in_features, num_classes):
        super().__init__()
        self.num_classes = num_classes
        self.net = nn.Sequential(nn.Linear(in_features, 128), nn.ReLU(), nn.Linear(128, num_classes))

    def forward(self, x):
        return self.net(x)


def evaluate(model, loader):
    model.eval()
    correct, total = 0, 0
    with torch.no_grad():
        for x, y in loader:
            x, y = x.to(device), y.to(device)
            preds = model(x).argmax(dim=1)
            correct += (preds == y).sum().item()
            total += y.size(0)
    model.train()
    return correct / total


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--epochs", type=int, default=10)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--lr", type=float, default=1e-3)
    parser.add_argument("--local_rank", "--local-rank", type=int, default=-1, help="set by the deepspeed launcher")
    args = parser.parse_args()

    # the deepspeed launcher sets these; plain `python train.py` runs as a single process (port 0: any free one)
    for key, value in dict(RANK="0", LOCAL_RANK="0", WORLD_SIZE="1", MASTER_ADDR="127.0.0.1", MASTER_PORT="0").items():
        os.environ.setdefault(key, value)
    local_rank = int(os.environ["LOCAL_RANK"])
    if torch.cuda.is_available():
        torch.cuda.set_device(local_rank)
    deepspeed.init_distributed(dist_backend="nccl" if torch.cuda.is_available() else "gloo")

    x = torch.randn(12000, 32)
    y = torch.randint(0, 8, (12000,))
    train_ds = TensorDataset(x[:10000], y[:10000])
    val_ds = TensorDataset(x[10000:], y[10000:])
    train_loader = DataLoader(train_ds, batch_size=args.batch_size, sampler=DistributedSampler(train_ds, shuffle=True))
    val_loader = DataLoader(val_ds, batch_size=256, shuffle=False)

    model = MLPClassifier(32, num_classes=8).to(device)
    if dist.get_rank() == 0:
        print(f"training a {model.num_classes}-way classifier")
    criterion = nn.CrossEntropyLoss(label_smoothing=0.1 if model.num_classes > 2 else 0.0)
    optimizer = torch.optim.Adam(model.parameters(), lr=args.lr)

    # DeepSpeed reads its settings from ds_config.json; the values this script computes itself
    # overwrite the file's, so the two never disagree
    with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "ds_config.json")) as config_file:
        ds_config = json.load(config_file)
    ds_config["train_micro_batch_size_per_gpu"] = args.batch_size
    model, optimizer, _, _ = deepspeed.initialize(model=model, optimizer=optimizer, config=ds_config)

    best_acc = 0.0
    for epoch in range(args.epochs):
        train_loader.sampler.set_epoch(epoch)
        model.train()
        for x, y in train_loader:
            x, y = x.to(device), y.to(device)
            loss = criterion(model(x), y)
            model.backward(loss)
            model.step()

        val_acc = evaluate(model, val_loader)
        if dist.get_rank() == 0:
            print(f"epoch {epoch}: loss {loss.item():.4f} val_acc {val_acc:.4f}")
        if val_acc > best_acc:
            best_acc = val_acc
            with deepspeed.zero.GatheredParameters(list(model.module.parameters())):  # ZeRO-3 shards the weights: every rank gathers
                model_state = {name: tensor.detach().cpu().clone() for name, tensor in model.module.state_dict().items()}
            if dist.get_rank() == 0:
                torch.save(model_state, "best.pt")
    dist.barrier()  # no rank exits while rank 0 still writes its files
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
