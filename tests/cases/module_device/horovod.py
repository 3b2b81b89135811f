"""Autoencoder; the device is chosen once at import time, the loop runs at the bottom of the file."""
import os
import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset
import horovod.torch as hvd
from torch.utils.data.distributed import DistributedSampler

DEVICE = torch.device(f"cuda:{os.environ.get('HOROVOD_LOCAL_RANK', '0')}" if torch.cuda.is_available() else "cpu")
device_type = "cuda" if torch.cuda.is_available() else "cpu"
gpu_count = 1
data_device = "cuda" if torch.cuda.is_available() else "cpu"


def make_model():
    return nn.Sequential(nn.Linear(16, 4), nn.ReLU(), nn.Linear(4, 16))


if __name__ == "__main__":
    hvd.init()
    local_rank = hvd.local_rank()
    if torch.cuda.is_available():
        torch.cuda.set_device(local_rank)

    images = torch.rand(256, 16)
    train_dataset = TensorDataset(images)
    loader = DataLoader(train_dataset, batch_size=16 * gpu_count, sampler=DistributedSampler(train_dataset, num_replicas=hvd.size(), rank=hvd.rank(), shuffle=True),
                        pin_memory=data_device == "cuda")
    model = make_model().to(DEVICE)
    hvd.broadcast_parameters(model.state_dict(), root_rank=0)  # every rank starts from rank 0's weights
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3 * hvd.size())
    optimizer = hvd.DistributedOptimizer(optimizer, named_parameters=model.named_parameters())
    for epoch in range(2):
        loader.sampler.set_epoch(epoch)
        for (x,) in loader:
            x = x.to(data_device, non_blocking=data_device == "cuda")
            with torch.autocast(device_type, enabled=device_type == "cuda"):
                loss = nn.functional.mse_loss(model(x), x)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        if hvd.rank() == 0:
            print(f"epoch {epoch}: {loss.item():.4f}")
    if hvd.rank() == 0:
        torch.save(model.state_dict(), "autoencoder.pt")
    hvd.barrier()  # no rank exits while rank 0 still writes its files
    hvd.shutdown()
