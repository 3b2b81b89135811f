import argparse
import logging
import math

import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset
import horovod.torch as hvd
from torch.utils.data.distributed import DistributedSampler

logger = logging.getLogger(__name__)


def main():
    logging.basicConfig(
        level=logging.INFO,
        format="%(asctime)s - %(name)s - %(levelname)s - %(message)s",
    )

    parser = argparse.ArgumentParser()
    parser.add_argument("--epochs", type=int, default=5)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--lr", type=float, default=1e-3)
    args = parser.parse_args()

    hvd.init()
    local_rank = hvd.local_rank()
    if torch.cuda.is_available():
        torch.cuda.set_device(local_rank)

    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if device.type == "cpu" and hvd.rank() == 0:
        logger.warning("CUDA not available, training on CPU will be slow")

    x = torch.randn(8000, 30)
    y = torch.randint(0, 2, (8000,))
    train_dataset = TensorDataset(x, y)
    train_loader = DataLoader(train_dataset, batch_size=args.batch_size, sampler=DistributedSampler(train_dataset, num_replicas=hvd.size(), rank=hvd.rank(), shuffle=True))

    model = nn.Sequential(nn.Linear(30, 64), nn.ReLU(), nn.Linear(64, 2)).to(device)
    hvd.broadcast_parameters(model.state_dict(), root_rank=0)  # every rank starts from rank 0's weights
    optimizer = torch.optim.Adam(model.parameters(), lr=args.lr * hvd.size())
    optimizer = hvd.DistributedOptimizer(optimizer, named_parameters=model.named_parameters())
    criterion = nn.CrossEntropyLoss()
    if hvd.rank() == 0:
        logger.info("Starting training for %d epochs (%d steps/epoch)", args.epochs, len(train_loader))

    for epoch in range(args.epochs):
        train_loader.sampler.set_epoch(epoch)
        total = 0.0
        for step, (inputs, labels) in enumerate(train_loader):
            inputs, labels = inputs.to(device), labels.to(device)

            optimizer.zero_grad()
            loss = criterion(model(inputs), labels)
            loss.backward()
            optimizer.step()
            total += loss.item()

            if step % 100 == 0 and hvd.rank() == 0:
                logger.info("epoch %d step %d loss %.4f", epoch, step, loss.item())

        avg = total / len(train_loader)
        if math.isnan(avg) and hvd.rank() == 0:
            logger.warning("loss became NaN at epoch %d", epoch)
        if hvd.rank() == 0:
            logger.info("epoch %d finished, avg loss %.4f", epoch, avg)

    if hvd.rank() == 0:
        torch.save(model.state_dict(), "model.pt")
        logger.info("model saved to model.pt")
    hvd.barrier()  # no rank exits while rank 0 still writes its files
    hvd.shutdown()


if __name__ == "__main__":
    main()
