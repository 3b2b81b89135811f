"""The training step, one epoch at a time."""

from torch.nn import functional


def train_one_epoch(model, loader, optimizer):
    model.train()
    total = 0.0
    for inputs, labels in loader:
        optimizer.zero_grad()
        loss = functional.cross_entropy(model(inputs), labels)
        loss.backward()
        optimizer.step()
        total += loss.item()
    return total / len(loader)
