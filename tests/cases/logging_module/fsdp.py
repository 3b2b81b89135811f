import argparse
import logging
import math
import os

import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset
import torch.distributed as dist
from torch.distributed.fsdp import fully_shard
from torch.utils.data.distributed import DistributedSampler
from torch.distributed.checkpoint.state_dict import get_model_state_dict, StateDictOptions

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

    # torchrun sets these; plain `python train.py` runs as a single process (port 0: any free one)
    for key, value in dict(RANK="0", LOCAL_RANK="0", WORLD_SIZE="1", MASTER_ADDR="127.0.0.1", MASTER_PORT="0").items():
        os.environ.setdefault(key, value)
    local_rank = int(os.environ["LOCAL_RANK"])
    if torch.cuda.is_available():
        torch.cuda.set_device(local_rank)
    dist.init_process_group("cpu:gloo,cuda:nccl" if torch.cuda.is_available() else "gloo")

    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if device.type == "cpu" and dist.get_rank() == 0:
        logger.warning("CUDA not available, training on CPU will be slow")

    x = torch.randn(8000, 30)
    y = torch.randint(0, 2, (8000,))
    train_dataset = TensorDataset(x, y)
    train_loader = DataLoader(train_dataset, batch_size=args.batch_size, sampler=DistributedSampler(train_dataset, shuffle=True))

    model = nn.Sequential(nn.Linear(30, 64), nn.ReLU(), nn.Linear(64, 2)).to(device)
    fully_shard(model)
    optimizer = torch.optim.Adam(model.parameters(), lr=args.lr)
    criterion = nn.CrossEntropyLoss()
    if dist.get_rank() == 0:
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

            if step % 100 == 0 and dist.get_rank() == 0:
                logger.info("epoch %d step %d loss %.4f", epoch, step, loss.item())

        avg = total / len(train_loader)
        if math.isnan(avg) and dist.get_rank() == 0:
            logger.warning("loss became NaN at epoch %d", epoch)
        if dist.get_rank() == 0:
            logger.info("epoch %d finished, avg loss %.4f", epoch, avg)

    model_state = get_model_state_dict(model, options=StateDictOptions(full_state_dict=True, cpu_offload=True))  # every rank gathers; rank 0 gets the full weights
    if dist.get_rank() == 0:
        torch.save(model_state, "model.pt")
        logger.info("model saved to model.pt")
    dist.barrier()  # no rank exits while rank 0 still writes its files
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
