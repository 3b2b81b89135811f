import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset
import horovod.torch as hvd
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
    hvd.init()
    local_rank = hvd.local_rank()
    if torch.cuda.is_available():
        torch.cuda.set_device(local_rank)

    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")

    train_dataset = make_dataset()
    train_loader = DataLoader(train_dataset, batch_size=BATCH_SIZE, sampler=DistributedSampler(train_dataset, num_replicas=hvd.size(), rank=hvd.rank(), shuffle=True))
    model = build_model().to(device)
    hvd.broadcast_parameters(model.state_dict(), root_rank=0)  # every rank starts from rank 0's weights
    optimizer = torch.optim.AdamW(model.parameters(), lr=LR * hvd.size(), weight_decay=0.01)
    optimizer = hvd.DistributedOptimizer(optimizer, named_parameters=model.named_parameters())
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
        epoch_loss = hvd.allreduce(torch.tensor(epoch_loss), op=hvd.Sum).item()

        epoch_loss /= len(train_loader.dataset)
        if hvd.rank() == 0:
            print(f"epoch {epoch + 1:02d} | loss {epoch_loss:.4f}")

    if hvd.rank() == 0:
        torch.save(model.state_dict(), CHECKPOINT_PATH)
        print("saved to", CHECKPOINT_PATH)
    hvd.barrier()  # no rank exits while rank 0 still writes its files
    hvd.shutdown()


if __name__ == "__main__":
    main()
