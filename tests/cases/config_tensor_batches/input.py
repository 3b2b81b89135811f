"""The data is one tensor of ready-made batches that the training function walks: a tensor has no
batch_size, so the DeepSpeed config cannot be overwritten from `batches.batch_size`."""
import torch
import torch.nn as nn


def fit(model, optimizer, batches, epochs):
    for epoch in range(epochs):
        for x in batches:
            loss = model(x).pow(2).mean()
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        print(f"epoch {epoch}: {loss.item():.4f}")


def main():
    batches = torch.randn(50, 32, 8)  # 50 batches of 32 rows
    model = nn.Linear(8, 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    fit(model, optimizer, batches, epochs=3)
    torch.save(model.state_dict(), "tensor_batches.pt")


if __name__ == "__main__":
    main()
