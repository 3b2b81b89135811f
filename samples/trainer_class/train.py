"""Train an MLP classifier on synthetic clustered data with a small Trainer class.

The dataset has 3 classes; each class is a Gaussian blob around its own centre
in a 20-dimensional feature space.
"""
import torch
import torch.nn.functional as F
from torch.utils.data import DataLoader, Dataset


class SyntheticBlobs(Dataset):
    """`size` points drawn around `num_classes` fixed centres (deterministic for a given `data_seed`)."""

    def __init__(self, size, num_features=20, num_classes=3, data_seed=7):
        g = torch.Generator().manual_seed(data_seed)
        centres = 1.5 * torch.randn(num_classes, num_features, generator=g)
        self.targets = torch.randint(0, num_classes, (size,), generator=g)
        self.data = centres[self.targets] + 2.0 * torch.randn(size, num_features, generator=g)

    def __len__(self):
        return len(self.targets)

    def __getitem__(self, index):
        return self.data[index], self.targets[index]


class Trainer:
    def __init__(
        self,
        model: torch.nn.Module,
        train_data: DataLoader,
        optimizer: torch.optim.Optimizer,
        gpu_id,
        save_every: int,
        checkpoint_path: str,
    ) -> None:
        self.gpu_id = gpu_id
        self.model = model.to(gpu_id)
        self.train_data = train_data
        self.optimizer = optimizer
        self.save_every = save_every
        self.checkpoint_path = checkpoint_path

    def _run_batch(self, source, targets):
        self.optimizer.zero_grad()
        output = self.model(source)
        loss = F.cross_entropy(output, targets)
        loss.backward()
        self.optimizer.step()
        return loss.item()

    def _run_epoch(self, epoch):
        self.model.train()
        total_loss = 0.0
        for source, targets in self.train_data:
            source = source.to(self.gpu_id)
            targets = targets.to(self.gpu_id)
            total_loss += self._run_batch(source, targets)
        b_sz = self.train_data.batch_size
        print(
            f"[{self.gpu_id}] epoch {epoch} train_loss {total_loss / len(self.train_data):.4f} "
            f"| batch size {b_sz} | steps {len(self.train_data)}"
        )

    def _save_checkpoint(self, epoch):
        ckp = self.model.state_dict()
        torch.save(ckp, self.checkpoint_path)
        print(f"epoch {epoch} | training checkpoint saved at {self.checkpoint_path}")

    def train(self, max_epochs: int):
        for epoch in range(1, max_epochs + 1):
            self._run_epoch(epoch)
            if epoch % self.save_every == 0:
                self._save_checkpoint(epoch)


def load_train_objs(lr):
    train_set = SyntheticBlobs(256)
    model = torch.nn.Sequential(
        torch.nn.Linear(20, 64),
        torch.nn.ReLU(),
        torch.nn.Linear(64, 64),
        torch.nn.ReLU(),
        torch.nn.Linear(64, 3),
    )
    optimizer = torch.optim.SGD(model.parameters(), lr=lr, momentum=0.9)
    return train_set, model, optimizer


def prepare_dataloader(dataset: Dataset, batch_size: int, shuffle: bool = True):
    return DataLoader(
        dataset,
        batch_size=batch_size,
        pin_memory=torch.cuda.is_available(),
        shuffle=shuffle,
    )


def main(device, total_epochs, save_every, batch_size, lr=0.01, seed=0, shuffle=True,
         checkpoint_path="checkpoint.pt", save_path=None):
    torch.manual_seed(seed)
    dataset, model, optimizer = load_train_objs(lr)
    train_data = prepare_dataloader(dataset, batch_size, shuffle)
    trainer = Trainer(model, train_data, optimizer, device, save_every, checkpoint_path)
    trainer.train(total_epochs)
    if save_path:
        torch.save(trainer.model.state_dict(), save_path)
        print(f"final model saved at {save_path}")


if __name__ == "__main__":
    import argparse

    parser = argparse.ArgumentParser(description="simple training job")
    parser.add_argument("--epochs", type=int, default=5, help="total epochs to train the model")
    parser.add_argument("--save-every", type=int, default=2, help="how often (in epochs) to save a checkpoint")
    parser.add_argument("--checkpoint-path", type=str, default="checkpoint.pt")
    parser.add_argument("--batch-size", type=int, default=16, help="input batch size (default: 16)")
    parser.add_argument("--lr", type=float, default=0.01)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--save", type=str, default=None, help="write the final state_dict here")
    parser.add_argument("--no-shuffle", action="store_true")
    args = parser.parse_args()

    device = 0 if torch.cuda.is_available() else "cpu"
    main(
        device,
        args.epochs,
        args.save_every,
        args.batch_size,
        lr=args.lr,
        seed=args.seed,
        shuffle=not args.no_shuffle,
        checkpoint_path=args.checkpoint_path,
        save_path=args.save,
    )
