import numpy as np
import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset
import horovod.torch as hvd
from torch.utils.data.distributed import DistributedSampler


def train_epoch(model, loader, opt, device):
    model.train()
    losses = []
    for x, y in loader:
        x, y = x.to(device), y.to(device)
        opt.zero_grad()
        loss = nn.functional.mse_loss(model(x), y)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return np.mean(losses)


def main():
    hvd.init()
    local_rank = hvd.local_rank()
    if torch.cuda.is_available():
        torch.cuda.set_device(local_rank)

    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    data = TensorDataset(torch.randn(64, 8), torch.randn(64, 1))
    loader = DataLoader(data, batch_size=8, sampler=DistributedSampler(data, num_replicas=hvd.size(), rank=hvd.rank(), shuffle=True))
    model = nn.Linear(8, 1).to(device)
    hvd.broadcast_parameters(model.state_dict(), root_rank=0)  # every rank starts from rank 0's weights
    opt = torch.optim.SGD(model.parameters(), lr=0.1 * hvd.size())
    opt = hvd.DistributedOptimizer(opt, named_parameters=model.named_parameters())
    scheduler = torch.optim.lr_scheduler.ReduceLROnPlateau(opt, patience=1)
    best = float("inf")
    for epoch in range(6):
        loader.sampler.set_epoch(epoch)
        mean_loss = train_epoch(model, loader, opt, device)
        # what train_epoch returned covers this rank's batches only: the mean over every rank
        mean_loss = hvd.allreduce(torch.tensor(mean_loss, dtype=torch.float64), op=hvd.Average).item()
        scheduler.step(mean_loss)
        if hvd.rank() == 0:
            print(f"epoch {epoch} loss {mean_loss:.4f} lr {opt.param_groups[0]['lr']}")
        if mean_loss < best:
            if hvd.rank() == 0:
                torch.save(model.state_dict(), "ckpt.pt")
            best = mean_loss
    hvd.barrier()  # no rank exits while rank 0 still writes its files
    hvd.shutdown()


if __name__ == "__main__":
    main()
