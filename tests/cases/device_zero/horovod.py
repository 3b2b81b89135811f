import argparse

import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset
import horovod.torch as hvd
from torch.utils.data.distributed import DistributedSampler


def get_loader(batch_size):
    # toy sequence data: predict the sum of a random sequence
    seqs = torch.randn(4096, 16, 8)
    targets = seqs.sum(dim=(1, 2)).unsqueeze(-1)
    train_dataset = TensorDataset(seqs, targets)
    return DataLoader(train_dataset, batch_size=batch_size, sampler=DistributedSampler(train_dataset, num_replicas=hvd.size(), rank=hvd.rank(), shuffle=True))


class GRURegressor(nn.Module):
    def __init__(self, input_size=8, hidden_size=64):
        super().__init__()
        self.rnn = nn.GRU(input_size, hidden_size, batch_first=True)
        self.out = nn.Linear(hidden_size, 1)

    def forward(self, x):
        _, h = self.rnn(x)
        return self.out(h[-1])


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--epochs", type=int, default=8)
    parser.add_argument("--bs", type=int, default=32)
    parser.add_argument("--lr", type=float, default=1e-3)
    args = parser.parse_args()

    hvd.init()
    local_rank = hvd.local_rank()
    if torch.cuda.is_available():
        torch.cuda.set_device(local_rank)

    device = local_rank if torch.cuda.is_available() else "cpu"  # just use the first GPU

    loader = get_loader(args.bs)
    model = GRURegressor().to(device)
    hvd.broadcast_parameters(model.state_dict(), root_rank=0)  # every rank starts from rank 0's weights
    optimizer = torch.optim.Adam(model.parameters(), lr=args.lr * hvd.size())
    optimizer = hvd.DistributedOptimizer(optimizer, named_parameters=model.named_parameters())
    loss_fn = nn.SmoothL1Loss()

    for epoch in range(args.epochs):
        loader.sampler.set_epoch(epoch)
        losses = []
        for seq, target in loader:
            seq = seq.to(device)
            target = target.to(device)

            pred = model(seq)
            loss = loss_fn(pred, target)

            optimizer.zero_grad()
            loss.backward()
            optimizer.synchronize()  # average the gradients across ranks before they are read
            nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            with optimizer.skip_synchronize():
                optimizer.step()
            losses.append(loss.item())

        if hvd.rank() == 0:
            print(f"epoch {epoch}: mean loss {sum(losses) / len(losses):.4f}")

    if hvd.rank() == 0:
        torch.save(model.state_dict(), "gru.pt")
    hvd.barrier()  # no rank exits while rank 0 still writes its files
    hvd.shutdown()


if __name__ == "__main__":
    main()
