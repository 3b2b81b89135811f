import torch


def evaluate(net, loader, device):
    """Per-class accuracy: reads the model's class count."""
    hits = torch.zeros(net.n_classes)
    seen = torch.zeros(net.n_classes)
    net.eval()
    with torch.no_grad():
        for x, y in loader:
            pred = net(x.to(device)).argmax(1).cpu()
            for cls in range(net.n_classes):
                seen[cls] += (y == cls).sum()
                hits[cls] += ((y == cls) & (pred == cls)).sum()
    net.train()
    return (hits / seen.clamp(min=1)).tolist()


def count(net):
    return sum(p.numel() for p in net.parameters())
