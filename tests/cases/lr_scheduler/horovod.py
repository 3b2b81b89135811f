import argparse

import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset
import horovod.torch as hvd
from torch.utils.data.distributed import DistributedSampler


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--epochs", type=int, default=10)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--max-lr", type=float, default=1e-2)
    args = parser.parse_args()

    hvd.init()
    local_rank = hvd.local_rank()
    if torch.cuda.is_available():
        torch.cuda.set_device(local_rank)

    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")

    x = torch.randn(8192, 48)
    y = (x[:, :3].sum(dim=1) > 0).long()
    train_dataset = TensorDataset(x, y)
    train_loader = DataLoader(train_dataset, batch_size=args.batch_size, sampler=DistributedSampler(train_dataset, num_replicas=hvd.size(), rank=hvd.rank(), shuffle=True))

    model = nn.Sequential(nn.Linear(48, 128), nn.ReLU(), nn.Linear(128, 2)).to(device)
    hvd.broadcast_parameters(model.state_dict(), root_rank=0)  # every rank starts from rank 0's weights
    optimizer = torch.optim.SGD(model.parameters(), lr=args.max_lr * hvd.size(), momentum=0.9, nesterov=True)
    optimizer = hvd.DistributedOptimizer(optimizer, named_parameters=model.named_parameters())

    # one-cycle schedule, stepped after every optimizer step
    scheduler = torch.optim.lr_scheduler.OneCycleLR(
        optimizer,
        max_lr=args.max_lr * hvd.size(),
        epochs=args.epochs,
        steps_per_epoch=len(train_loader),
    )
    criterion = nn.CrossEntropyLoss()

    for epoch in range(args.epochs):
        train_loader.sampler.set_epoch(epoch)
        model.train()
        for step, (inputs, labels) in enumerate(train_loader):
            inputs, labels = inputs.to(device), labels.to(device)

            optimizer.zero_grad()
            loss = criterion(model(inputs), labels)
            loss.backward()
            optimizer.step()
            scheduler.step()

            if step % 50 == 0 and hvd.rank() == 0:
                print(f"epoch {epoch} step {step} loss {loss.item():.4f} lr {scheduler.get_last_lr()[0]:.6f}")

        if hvd.rank() == 0:
            print(f"end of epoch {epoch}, lr = {scheduler.get_last_lr()}")

    if hvd.rank() == 0:
        torch.save(model.state_dict(), "model_onecycle.pt")
    hvd.barrier()  # no rank exits while rank 0 still writes its files
    hvd.shutdown()


if __name__ == "__main__":
    main()
