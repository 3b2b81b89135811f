"""Fine-tuning with a slow optimizer for the pretrained body and a fast one for the new head."""
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

    samples = TensorDataset(torch.randn(512, 20), torch.randint(0, 3, (512,)))
    loader = DataLoader(samples, batch_size=16, sampler=DistributedSampler(samples, shuffle=True))

    model = nn.Sequential(nn.Linear(20, 64), nn.ReLU(), nn.Linear(64, 3))
    model = DDP(model)
    body_optimizer = torch.optim.SGD(model.module[0].parameters(), lr=1e-3, momentum=0.9)
    head_optimizer = torch.optim.Adam(model.module[2].parameters(), lr=1e-2)

    for epoch in range(5):
        loader.sampler.set_epoch(epoch)
        for features, labels in loader:
            body_optimizer.zero_grad()
            head_optimizer.zero_grad()
            loss = nn.functional.cross_entropy(model(features), labels)
            loss.backward()
            body_optimizer.step()
            head_optimizer.step()

    if dist.get_rank() == 0:
        torch.save(model.module.state_dict(), "finetuned.pt")
    dist.barrier()  # no rank exits while rank 0 still writes its files
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
