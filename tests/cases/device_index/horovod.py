"""Sequence classifier; the GPU is picked by number (--gpu), the way many research scripts do."""
import argparse

import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset
import horovod.torch as hvd
from torch.utils.data.distributed import DistributedSampler

AMP_DEVICE_TYPE = "cuda"  # autocast's device_type, not a device
NUM_GPUS = 1


class Classifier(nn.Module):
    def __init__(self, vocab, classes):
        super().__init__()
        self.embed = nn.EmbeddingBag(vocab, 64)
        self.head = nn.Linear(64, classes)

    def forward(self, tokens):
        return self.head(self.embed(tokens))


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--gpu", type=int, default=0)
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--resume", default="")
    args = parser.parse_args()

    hvd.init()
    local_rank = hvd.local_rank()
    if torch.cuda.is_available():
        torch.cuda.set_device(local_rank)

    device = torch.device(f"cuda:{local_rank}" if torch.cuda.is_available() else "cpu")
    use_amp = device.type == "cuda"

    tokens = torch.randint(0, 1000, (1024, 12))
    labels = torch.randint(0, 4, (1024,))
    train_dataset = TensorDataset(tokens, labels)
    loader = DataLoader(train_dataset, batch_size=64 * NUM_GPUS, sampler=DistributedSampler(train_dataset, num_replicas=hvd.size(), rank=hvd.rank(), shuffle=True))
    model = Classifier(1000, 4).to(device)
    if args.resume:
        model.load_state_dict(torch.load(args.resume, map_location=device))
    hvd.broadcast_parameters(model.state_dict(), root_rank=0)  # every rank starts from rank 0's weights
    criterion = nn.CrossEntropyLoss(weight=torch.ones(4)).to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1 * hvd.size())
    optimizer = hvd.DistributedOptimizer(optimizer, named_parameters=model.named_parameters())

    for epoch in range(args.epochs):
        loader.sampler.set_epoch(epoch)
        for x, y in loader:
            x, y = x.to(device), y.to(device)
            with torch.autocast(device_type=AMP_DEVICE_TYPE, dtype=torch.bfloat16, enabled=use_amp):
                loss = criterion(model(x), y)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        if hvd.rank() == 0:
            print(f"epoch {epoch} loss {loss.item():.3f}")
    if hvd.rank() == 0:
        torch.save(model.state_dict(), "classifier.pt")
    hvd.barrier()  # no rank exits while rank 0 still writes its files
    hvd.shutdown()


if __name__ == "__main__":
    main()
