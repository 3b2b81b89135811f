"""Train a small CNN (with BatchNorm) to classify synthetic 16x16 images.

Each image is low-amplitude noise plus one bright 4x4 square; the label (0-3) is
the quadrant that contains the square.
"""
import argparse
import logging

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, TensorDataset

logger = logging.getLogger(__name__)

IMAGE_SIZE = 16
NUM_CLASSES = 4


def make_quadrant_images(num_samples, generator):
    """Return (images, labels): a bright square placed in the quadrant given by the label."""
    images = 0.5 * torch.randn(num_samples, 1, IMAGE_SIZE, IMAGE_SIZE, generator=generator)
    labels = torch.randint(0, NUM_CLASSES, (num_samples,), generator=generator)
    offsets = torch.randint(0, 5, (num_samples, 2), generator=generator)
    half = IMAGE_SIZE // 2
    for i in range(num_samples):
        row = (labels[i].item() // 2) * half + offsets[i, 0].item()
        col = (labels[i].item() % 2) * half + offsets[i, 1].item()
        images[i, 0, row:row + 4, col:col + 4] += 0.6
    return images, labels


class SmallCNN(nn.Module):
    def __init__(self, num_classes=NUM_CLASSES, width=16):
        super().__init__()
        self.num_classes = num_classes
        self.features = nn.Sequential(
            nn.Conv2d(1, width, kernel_size=3, padding=1, bias=False),
            nn.BatchNorm2d(width),
            nn.ReLU(inplace=True),
            nn.MaxPool2d(2),
            nn.Conv2d(width, 2 * width, kernel_size=3, padding=1, bias=False),
            nn.BatchNorm2d(2 * width),
            nn.ReLU(inplace=True),
            nn.MaxPool2d(2),
        )
        self.classifier = nn.Linear(2 * width * (IMAGE_SIZE // 4) ** 2, num_classes)

    def forward(self, x):
        x = self.features(x)
        return self.classifier(torch.flatten(x, 1))


def evaluate(model, loader, device):
    """Return the accuracy of `model` on `loader`; per-class accuracy is logged at debug level."""
    model.eval()
    correct = torch.zeros(model.num_classes)
    total = torch.zeros(model.num_classes)
    with torch.no_grad():
        for images, labels in loader:
            images, labels = images.to(device), labels.to(device)
            preds = model(images).argmax(dim=1)
            hits = (preds == labels).cpu()
            labels = labels.cpu()
            total += torch.bincount(labels, minlength=model.num_classes).float()
            correct += torch.bincount(labels[hits], minlength=model.num_classes).float()
    per_class = correct / total.clamp(min=1)
    logger.debug("per-class accuracy: %s", ", ".join(f"{a:.2f}" for a in per_class.tolist()))
    return (correct.sum() / total.sum()).item()


def parse_args():
    parser = argparse.ArgumentParser(description="Small CNN on synthetic quadrant images")
    parser.add_argument("--epochs", type=int, default=5)
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--lr", type=float, default=2e-3)
    parser.add_argument("--weight-decay", type=float, default=1e-2)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--save", type=str, default=None, help="write the final state_dict here")
    parser.add_argument("--checkpoint", type=str, default=None, help="write a resumable checkpoint here every epoch")
    parser.add_argument("--resume", type=str, default=None, help="resume from a checkpoint written by --checkpoint")
    parser.add_argument("--no-shuffle", action="store_true")
    return parser.parse_args()


def main():
    args = parse_args()
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")

    g = torch.Generator().manual_seed(2024)
    train_images, train_labels = make_quadrant_images(256, g)
    val_images, val_labels = make_quadrant_images(64, g)
    train_loader = DataLoader(
        TensorDataset(train_images, train_labels),
        batch_size=args.batch_size,
        shuffle=not args.no_shuffle,
    )
    val_loader = DataLoader(TensorDataset(val_images, val_labels), batch_size=64, shuffle=False)

    torch.manual_seed(args.seed)
    model = SmallCNN().to(device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=args.weight_decay)

    start_epoch = 0
    if args.resume:
        checkpoint = torch.load(args.resume, map_location=device)
        model.load_state_dict(checkpoint["model"])
        optimizer.load_state_dict(checkpoint["optimizer"])
        start_epoch = checkpoint["epoch"]
        logger.info(f"resumed from {args.resume} at epoch {start_epoch}")
    scheduler = torch.optim.lr_scheduler.CosineAnnealingLR(
        optimizer, T_max=args.epochs, last_epoch=start_epoch - 1
    )

    logger.info(f"device: {device}, classes: {model.num_classes}, train samples: {len(train_loader.dataset)}")
    for epoch in range(start_epoch + 1, args.epochs + 1):
        model.train()
        running_loss, num_batches = 0.0, 0
        for images, labels in train_loader:
            images, labels = images.to(device), labels.to(device)
            logits = model(images)
            loss = F.cross_entropy(logits, labels)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            running_loss += loss.item()
            num_batches += 1
        scheduler.step()

        val_acc = evaluate(model, val_loader, device)
        logger.info(
            f"epoch {epoch} train_loss {running_loss / num_batches:.4f} "
            f"lr {scheduler.get_last_lr()[0]:.6f}"
        )
        logger.info(f"epoch {epoch} val_acc {val_acc:.4f}")

        if args.checkpoint:
            torch.save(
                {
                    "model": model.state_dict(),
                    "optimizer": optimizer.state_dict(),
                    "epoch": epoch,
                },
                args.checkpoint,
            )

    if args.save:
        torch.save(model.state_dict(), args.save)
        logger.info(f"saved model to {args.save}")


if __name__ == "__main__":
    main()
