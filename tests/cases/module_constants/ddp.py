import os
import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data.distributed import DistributedSampler

# hyper-parameters
BATCH_SIZE = 64
LR = 3e-4
EPOCHS = 10
HIDDEN = 256
CHECKPOINT_PATH = "mlp.pt"


def make_dataset(n=20000, dim=64, n_classes=10):
    x = torch.randn(n, dim)
    y = torch.randint(0, n_classes, (n,))
    return TensorDataset(x, y)


def build_model(dim=64, n_classes=10):
    return nn.Sequential(
        nn.Linear(dim, HIDDEN),
        nn.GELU(),
        nn.Dropout(0.1),
        nn.Linear(HIDDEN, n_classes),
    )


def main():
    # torchrun sets these; plain `python train.py` runs as a single process (port 0: any free one)
    for key, value in dict(RANK="0", LOCAL_RANK="0", WORLD_SIZE="1", MASTER_ADDR="127.0.0.1", MASTER_PORT="0").items():
        os.environ.setdefault(key, value)
    local_rank = int(os.environ["LOCAL_RANK"])
    if torch.cuda.is_available():
        torch.cuda.set_device(local_rank)
    dist.init_process_group("cpu:gloo,cuda:nccl" if torch.cuda.is_available() else "gloo")

    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")

    train_dataset = make_dataset()
    train_loader = DataLoader(train_dataset, batch_size=BATCH_SIZE, sampler=DistributedSampler(train_dataset, shuffle=True))
    model = build_model().to(device)
    model = DDP(model)
    optimizer = torch.optim.AdamW(model.parameters(), lr=LR, weight_decay=0.01)
    loss_fn = nn.CrossEntropyLoss()

    for epoch in range(EPOCHS):
        train_loader.sampler.set_epoch(epoch)
        model.train()
        epoch_loss = 0.0
        for xb, yb in train_loader:
            xb, yb = xb.to(device), yb.to(device)
            optimizer.zero_grad()
            loss = loss_fn(model(xb), yb)
            loss.backward()
            optimizer.step()
            epoch_loss += loss.item() * xb.size(0)
        # the epoch's figures over every rank's batches, not only this rank's share
        figures = torch.tensor([epoch_loss], dtype=torch.float64)
        dist.all_reduce(figures)
        epoch_loss = figures[0].item()

        epoch_loss /= len(train_loader.dataset)
        if dist.get_rank() == 0:
            print(f"epoch {epoch + 1:02d} | loss {epoch_loss:.4f}")

    if dist.get_rank() == 0:
        torch.save(model.module.state_dict(), CHECKPOINT_PATH)
        print("saved to", CHECKPOINT_PATH)
    dist.barrier()  # no rank exits while rank 0 still writes its files
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
