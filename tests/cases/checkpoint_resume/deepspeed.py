import argparse
import os
import json

import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset
import deepspeed
from torch.utils.data.distributed import DistributedSampler
import torch.distributed as dist


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--epochs", type=int, default=20)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--lr", type=float, default=1e-3)
    parser.add_argument("--ckpt-dir", type=str, default="checkpoints")
    parser.add_argument("--resume", type=str, default="", help="path to checkpoint to resume from")
    parser.add_argument("--local_rank", "--local-rank", type=int, default=-1, help="set by the deepspeed launcher")
    args = parser.parse_args()

    # the deepspeed launcher sets these; plain `python train.py` runs as a single process (port 0: any free one)
    for key, value in dict(RANK="0", LOCAL_RANK="0", WORLD_SIZE="1", MASTER_ADDR="127.0.0.1", MASTER_PORT="0").items():
        os.environ.setdefault(key, value)
    local_rank = int(os.environ["LOCAL_RANK"])
    if torch.cuda.is_available():
        torch.cuda.set_device(local_rank)
    deepspeed.init_distributed(dist_backend="nccl" if torch.cuda.is_available() else "gloo")

    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    os.makedirs(args.ckpt_dir, exist_ok=True)

    x = torch.randn(10000, 16)
    y = torch.randint(0, 4, (10000,))
    train_dataset = TensorDataset(x, y)
    train_loader = DataLoader(train_dataset, batch_size=args.batch_size, sampler=DistributedSampler(train_dataset, shuffle=True))

    model = nn.Sequential(nn.Linear(16, 64), nn.ReLU(), nn.Linear(64, 4)).to(device)
    optimizer = torch.optim.Adam(model.parameters(), lr=args.lr)
    criterion = nn.CrossEntropyLoss()

    start_epoch = 0
    if args.resume:
        ckpt = torch.load(args.resume, map_location=device)
        model.load_state_dict(ckpt["model"])
        optimizer.load_state_dict(ckpt["optimizer"])
        start_epoch = ckpt["epoch"] + 1
        if dist.get_rank() == 0:
            print(f"resumed from {args.resume} at epoch {start_epoch}")

    # DeepSpeed reads its settings from ds_config.json; the values this script computes itself
    # overwrite the file's, so the two never disagree
    with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "ds_config.json")) as config_file:
        ds_config = json.load(config_file)
    ds_config["train_micro_batch_size_per_gpu"] = args.batch_size
    model, optimizer, _, _ = deepspeed.initialize(model=model, optimizer=optimizer, config=ds_config)

    for epoch in range(start_epoch, args.epochs):
        train_loader.sampler.set_epoch(epoch)
        model.train()
        for inputs, labels in train_loader:
            inputs, labels = inputs.to(device), labels.to(device)
            loss = criterion(model(inputs), labels)
            model.backward(loss)
            model.step()

        if dist.get_rank() == 0:
            print(f"epoch {epoch}: loss {loss.item():.4f}")

        # save a full checkpoint every epoch so we can resume
        with deepspeed.zero.GatheredParameters(list(model.module.parameters())):  # ZeRO-3 shards the weights: every rank gathers
            model_state = {name: tensor.detach().cpu().clone() for name, tensor in model.module.state_dict().items()}
        checkpoint = {
            "model": model_state,
            "optimizer": optimizer.state_dict(),
            "epoch": epoch,
        }
        if dist.get_rank() == 0:
            torch.save(checkpoint, os.path.join(args.ckpt_dir, f"ckpt_{epoch:03d}.pt"))
    dist.barrier()  # no rank exits while rank 0 still writes its files
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
