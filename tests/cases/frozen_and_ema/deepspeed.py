import argparse
import copy
import json
import os

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, TensorDataset
import deepspeed
from torch.utils.data.distributed import DistributedSampler
import torch.distributed as dist


class AutoEncoder(nn.Module):
    def __init__(self, dim=32, code=4):
        super().__init__()
        self.encoder = nn.Sequential(nn.Linear(dim, 16), nn.ReLU(), nn.Linear(16, code))
        self.decoder = nn.Sequential(nn.Linear(code, 16), nn.ReLU(), nn.Linear(16, dim))

    def forward(self, x):
        return self.decoder(self.encoder(x))


def feature_extractor(dim=32):
    """Stands in for a pretrained network (a VGG's first blocks) used for a perceptual loss."""
    torch.manual_seed(1234)
    return nn.Sequential(nn.Linear(dim, 64), nn.Tanh(), nn.Linear(64, 64))


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--lr", type=float, default=1e-3)
    parser.add_argument("--ema-decay", type=float, default=0.99)
    parser.add_argument("--perceptual-weight", type=float, default=0.1)
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
    torch.manual_seed(0)
    data = torch.randn(640, 32)
    train_dataset = TensorDataset(data)
    loader = DataLoader(train_dataset, batch_size=args.batch_size, sampler=DistributedSampler(train_dataset, shuffle=True))
    val_x = torch.randn(64, 32).to(device)

    # a frozen network: called in every step, but no optimizer holds its parameters
    vgg = feature_extractor().to(device).eval()
    for p in vgg.parameters():
        p.requires_grad = False

    model = AutoEncoder().to(device)
    ema_model = copy.deepcopy(model).eval().requires_grad_(False)
    optimizer = torch.optim.Adam(model.parameters(), lr=args.lr)

    # DeepSpeed reads its settings from ds_config.json; the values this script computes itself
    # overwrite the file's, so the two never disagree
    with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "ds_config.json")) as config_file:
        ds_config = json.load(config_file)
    ds_config["train_micro_batch_size_per_gpu"] = args.batch_size
    model, optimizer, _, _ = deepspeed.initialize(model=model, optimizer=optimizer, config=ds_config)

    for epoch in range(args.epochs):
        loader.sampler.set_epoch(epoch)
        model.train()
        for (x,) in loader:
            x = x.to(device)
            recon = model(x)
            perceptual = F.mse_loss(vgg(recon), vgg(x))
            loss = F.mse_loss(recon, x) + args.perceptual_weight * perceptual
            model.backward(loss)
            model.step()
            with torch.no_grad():
                with deepspeed.zero.GatheredParameters(list(model.parameters())):  # ZeRO-3 shards the weights: every rank gathers
                    for ema_p, p in zip(ema_model.parameters(), model.parameters()):
                        ema_p.mul_(args.ema_decay).add_(p, alpha=1 - args.ema_decay)

        with torch.no_grad():
            val_loss = F.mse_loss(ema_model(val_x), val_x)
        if dist.get_rank() == 0:
            print(f"epoch {epoch}: train {loss.item():.4f} ema val {val_loss.item():.4f}")

    with deepspeed.zero.GatheredParameters(list(model.module.parameters())):  # ZeRO-3 shards the weights: every rank gathers
        model_state = {name: tensor.detach().cpu().clone() for name, tensor in model.module.state_dict().items()}
    if dist.get_rank() == 0:
        torch.save(model_state, "autoencoder.pt")
        torch.save(ema_model.state_dict(), "autoencoder_ema.pt")
    dist.barrier()  # no rank exits while rank 0 still writes its files
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
