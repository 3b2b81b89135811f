import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset


class Net(nn.Module):
    def __init__(self, width):
        super().__init__()
        self.fc = nn.Linear(8, width)
        self.out = nn.Linear(width, 2)

    def forward(self, x):
        return self.out(torch.relu(self.fc(x)))


def main():
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    data = TensorDataset(torch.randn(64, 8), torch.randint(0, 2, (64,)))
    loader = DataLoader(data, batch_size=16, shuffle=True)
    teacher = Net(32).to(device)
    teacher.load_state_dict(torch.load("teacher.pt", map_location=device))
    teacher.eval()
    for p in teacher.parameters():
        p.requires_grad = False
    student = Net(4).to(device)
    optimizer = torch.optim.Adam(student.parameters(), lr=1e-3)
    for epoch in range(2):
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
        print(epoch, loss.item(), teacher.fc.out_features, student.fc.out_features)
        torch.save(student.state_dict(), "student.pt")


if __name__ == "__main__":
    main()
