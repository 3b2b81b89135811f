import os
import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data.distributed import DistributedSampler


class Net(nn.Module):
    def __init__(self, width):
        super().__init__()
        self.fc = nn.Linear(8, width)
        self.out = nn.Linear(width, 2)

    def forward(self, x):
        return self.out(torch.relu(self.fc(x)))


def main():
    # torchrun sets these; plain `python train.py` runs as a single process (port 0: any free one)
    for key, value in dict(RANK="0", LOCAL_RANK="0", WORLD_SIZE="1", MASTER_ADDR="127.0.0.1", MASTER_PORT="0").items():
        os.environ.setdefault(key, value)
    local_rank = int(os.environ["LOCAL_RANK"])
    if torch.cuda.is_available():
        torch.cuda.set_device(local_rank)
    dist.init_process_group("cpu:gloo,cuda:nccl" if torch.cuda.is_available() else "gloo")

    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    data = TensorDataset(torch.randn(64, 8), torch.randint(0, 2, (64,)))
    loader = DataLoader(data, batch_size=16, sampler=DistributedSampler(data, shuffle=True))
    teacher = Net(32).to(device)
    teacher.load_state_dict(torch.load("teacher.pt", map_location=device))
    teacher.eval()
    for p in teacher.parameters():
        p.requires_grad = False
    student = Net(4).to(device)
    student = DDP(student)
    optimizer = torch.optim.Adam(student.parameters(), lr=1e-3)
    for epoch in range(2):
        loader.sampler.set_epoch(epoch)
        for x, y in loader:
            x, y = x.to(device), y.to(device)
            with torch.no_grad():
                soft = teacher(x).softmax(1)
            logits = student(x)
            loss = nn.functional.cross_entropy(logits, y) + nn.functional.kl_div(
                logits.log_softmax(1), soft, reduction="batchmean"
            )
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        if dist.get_rank() == 0:
            print(epoch, loss.item(), teacher.fc.out_features, student.module.fc.out_features)
            torch.save(student.module.state_dict(), "student.pt")
    dist.barrier()  # no rank exits while rank 0 still writes its files
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
