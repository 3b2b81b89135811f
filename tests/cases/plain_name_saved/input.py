"""The network is built under one name and trained under another; checkpoints save the first name."""
import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset


def main():
    detector = nn.Sequential(nn.Conv1d(3, 8, 3, padding=1), nn.ReLU(), nn.Flatten(), nn.Linear(8 * 20, 4))
    net = detector
    if torch.cuda.is_available():
        net = torch.nn.DataParallel(detector).cuda()
    optimizer = torch.optim.SGD(net.parameters(), lr=1e-3, momentum=0.9)
    loader = DataLoader(TensorDataset(torch.randn(160, 3, 20), torch.randn(160, 4)), batch_size=8, shuffle=True)
    for iteration, (signals, boxes) in enumerate(loader):
        optimizer.zero_grad()
        loss = nn.functional.smooth_l1_loss(net(signals), boxes)
        loss.backward()
        optimizer.step()
        if iteration % 10 == 0:
            torch.save(detector.state_dict(), f"detector_{iteration}.pth")
    torch.save(detector.state_dict(), "detector_final.pth")


if __name__ == "__main__":
    main()
