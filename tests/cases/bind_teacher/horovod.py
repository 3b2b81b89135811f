import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset
import horovod.torch as hvd
from torch.utils.data.distributed import DistributedSampler


class Net(nn.Module):
    def __init__(self, width):
        super().__init__()
        self.fc = nn.Linear(8, width)
        self.out = nn.Linear(width, 2)

    def forward(self, x):
        return self.out(torch.relu(self.fc(x)))


def main():
    hvd.init()
    local_rank = hvd.local_rank()
    if torch.cuda.is_available():
        torch.cuda.set_device(local_rank)

    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    data = TensorDataset(torch.randn(64, 8), torch.randint(0, 2, (64,)))
    loader = DataLoader(data, batch_size=16, sampler=DistributedSampler(data, num_replicas=hvd.size(), rank=hvd.rank(), shuffle=True))
    teacher = Net(32).to(device)
    teacher.load_state_dict(torch.load("teacher.pt", map_location=device))
    teacher.eval()
    for p in teacher.parameters():
        p.requires_grad = False
    student = Net(4).to(device)
    hvd.broadcast_parameters(student.state_dict(), root_rank=0)  # every rank starts from rank 0's weights
    optimizer = torch.optim.Adam(student.parameters(), lr=1e-3 * hvd.size())
    optimizer = hvd.DistributedOptimizer(optimizer, named_parameters=student.named_parameters())
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
        if hvd.rank() == 0:
            print(epoch, loss.item(), teacher.fc.out_features, student.fc.out_features)
            torch.save(student.state_dict(), "student.pt")
    hvd.barrier()  # no rank exits while rank 0 still writes its files
    hvd.shutdown()


if __name__ == "__main__":
    main()
