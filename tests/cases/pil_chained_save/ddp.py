"""A tiny denoiser that writes its validation outputs as PNG files after each epoch."""

import os

import matplotlib.pyplot as plt
import torch
import torch.nn as nn
from PIL import Image
from torch.utils.data import DataLoader, TensorDataset
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data.distributed import DistributedSampler


def validate(model, images, epoch):
    model.eval()
    losses = []
    with torch.no_grad():
        for i, clean in enumerate(images):
            noisy = clean + 0.1 * torch.randn_like(clean)
            restored = model(noisy.unsqueeze(0)).squeeze(0).clamp(0, 1)
            losses.append(nn.functional.mse_loss(restored, clean).item())
            pixels = (restored.squeeze(0) * 255).byte().numpy()
            if dist.get_rank() == 0:
                Image.fromarray(pixels).save("results/%d_restored.png" % i)
                Image.fromarray(pixels).convert("RGB").resize((64, 64)).save(f"results/{i}_large.png")
    plt.plot(losses)
    if dist.get_rank() == 0:
        plt.savefig("results/loss_%d.png" % epoch)
    plt.close()
    model.train()


def main():
    # torchrun sets these; plain `python train.py` runs as a single process (port 0: any free one)
    for key, value in dict(RANK="0", LOCAL_RANK="0", WORLD_SIZE="1", MASTER_ADDR="127.0.0.1", MASTER_PORT="0").items():
        os.environ.setdefault(key, value)
    local_rank = int(os.environ["LOCAL_RANK"])
    if torch.cuda.is_available():
        torch.cuda.set_device(local_rank)
    dist.init_process_group("cpu:gloo,cuda:nccl" if torch.cuda.is_available() else "gloo")

    os.makedirs("results", exist_ok=True)
    images = torch.rand(64, 1, 16, 16)
    train_dataset = TensorDataset(images)
    loader = DataLoader(train_dataset, batch_size=8, sampler=DistributedSampler(train_dataset, shuffle=True))
    model = nn.Sequential(nn.Conv2d(1, 8, 3, padding=1), nn.ReLU(), nn.Conv2d(8, 1, 3, padding=1))
    model = DDP(model)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    for epoch in range(2):
        loader.sampler.set_epoch(epoch)
        for (clean,) in loader:
            noisy = clean + 0.1 * torch.randn_like(clean)
            loss = nn.functional.mse_loss(model(noisy), clean)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        validate(model, images[:4], epoch)
    dist.barrier()  # no rank exits while rank 0 still writes its files
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
