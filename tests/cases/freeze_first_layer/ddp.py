"""Fine-tunes the head of a small network while its first layer stays fixed: only `model[0]` is
frozen, so the rest of the model still trains and DDP has parameters to average."""
import os
import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data.distributed import DistributedSampler


def main():
    # torchrun sets these; plain `python train.py` runs as a single process (port 0: any free one)
    for key, value in dict(RANK="0", LOCAL_RANK="0", WORLD_SIZE="1", MASTER_ADDR="127.0.0.1", MASTER_PORT="0").items():
        os.environ.setdefault(key, value)
    local_rank = int(os.environ["LOCAL_RANK"])
    if torch.cuda.is_available():
        torch.cuda.set_device(local_rank)
    dist.init_process_group("cpu:gloo,cuda:nccl" if torch.cuda.is_available() else "gloo")

    features = torch.randn(256, 12)
    labels = torch.randint(0, 3, (256,))
    train_dataset = TensorDataset(features, labels)
    loader = DataLoader(train_dataset, batch_size=32, sampler=DistributedSampler(train_dataset, shuffle=True))

    model = nn.Sequential(nn.Linear(12, 24), nn.ReLU(), nn.Linear(24, 3))
    for p in model[0].parameters():
        p.requires_grad = False
    model = DDP(model)
    optimizer = torch.optim.SGD([p for p in model.parameters() if p.requires_grad], lr=0.05)

    for epoch in range(2):
        loader.sampler.set_epoch(epoch)
        for x, y in loader:
            loss = nn.functional.cross_entropy(model(x), y)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        if dist.get_rank() == 0:
            print(f"epoch {epoch}: loss {loss.item():.4f}")
    if dist.get_rank() == 0:
        torch.save(model.module.state_dict(), "head_tuned.pt")
    dist.barrier()  # no rank exits while rank 0 still writes its files
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
