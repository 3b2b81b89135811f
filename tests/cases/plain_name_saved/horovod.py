"""The network is built under one name and trained under another; checkpoints save the first name."""
import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset
import horovod.torch as hvd
from torch.utils.data.distributed import DistributedSampler


def main():
    hvd.init()
    local_rank = hvd.local_rank()
    if torch.cuda.is_available():
        torch.cuda.set_device(local_rank)
    device = torch.device(f"cuda:{local_rank}" if torch.cuda.is_available() else "cpu")

    detector = nn.Sequential(nn.Conv1d(3, 8, 3, padding=1), nn.ReLU(), nn.Flatten(), nn.Linear(8 * 20, 4))
    net = detector
    if torch.cuda.is_available():
        net = detector.to(device)
    hvd.broadcast_parameters(net.state_dict(), root_rank=0)  # every rank starts from rank 0's weights
    optimizer = torch.optim.SGD(net.parameters(), lr=1e-3 * hvd.size(), momentum=0.9)
    optimizer = hvd.DistributedOptimizer(optimizer, named_parameters=net.named_parameters())
    train_dataset = TensorDataset(torch.randn(160, 3, 20), torch.randn(160, 4))
    loader = DataLoader(train_dataset, batch_size=8, sampler=DistributedSampler(train_dataset, num_replicas=hvd.size(), rank=hvd.rank(), shuffle=True))
    for iteration, (signals, boxes) in enumerate(loader):
        optimizer.zero_grad()
        loss = nn.functional.smooth_l1_loss(net(signals), boxes)
        loss.backward()
        optimizer.step()
        if iteration % 10 == 0 and hvd.rank() == 0:
            torch.save(detector.state_dict(), f"detector_{iteration}.pth")
    if hvd.rank() == 0:
        torch.save(detector.state_dict(), "detector_final.pth")
    hvd.barrier()  # no rank exits while rank 0 still writes its files
    hvd.shutdown()


if __name__ == "__main__":
    main()
