"""One pass over the data: forward, loss, backward, step."""

from torch.nn import functional

from utils import RunningMean


def train_one_epoch(model, loader, optimizer):
    model.train()
    running = RunningMean()
    for features, labels in loader:
        optimizer.zero_grad()
        loss = functional.cross_entropy(model(features), labels)
        loss.backward()
        optimizer.step()
        running.add(loss.item())
    return running.value()
