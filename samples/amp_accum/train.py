"""Train a residual MLP regressor with mixed precision, gradient accumulation and clipping.

Targets are a fixed smooth nonlinear function of 16 input features plus a little noise.
Mixed precision (float16 autocast + GradScaler) is used only when CUDA is available.
"""
import argparse

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, TensorDataset
from tqdm import tqdm

IN_FEATURES = 16


def make_dataset(num_samples, generator):
    x = torch.randn(num_samples, IN_FEATURES, generator=generator)
    w1 = torch.randn(IN_FEATURES, 1, generator=generator) / IN_FEATURES ** 0.5
    w2 = torch.randn(IN_FEATURES, 1, generator=generator) / IN_FEATURES ** 0.5
    y = torch.sin(2.0 * x @ w1) + 0.5 * (x @ w2) ** 2 + 0.05 * torch.randn(num_samples, 1, generator=generator)
    return TensorDataset(x, y)


class ResidualBlock(nn.Module):
    def __init__(self, dim, expansion=2):
        super().__init__()
        self.norm = nn.LayerNorm(dim)
        self.fc1 = nn.Linear(dim, expansion * dim)
        self.fc2 = nn.Linear(expansion * dim, dim)

    def forward(self, x):
        return x + self.fc2(F.gelu(self.fc1(self.norm(x))))


class ResidualMLP(nn.Module):
    def __init__(self, in_features, hidden=64, depth=3):
        super().__init__()
        self.stem = nn.Linear(in_features, hidden)
        self.blocks = nn.Sequential(*[ResidualBlock(hidden) for _ in range(depth)])
        self.norm = nn.LayerNorm(hidden)
        self.head = nn.Linear(hidden, 1)

    def forward(self, x):
        return self.head(self.norm(self.blocks(self.stem(x))))


def main():
    parser = argparse.ArgumentParser(description="Residual MLP regression with AMP and gradient accumulation")
    parser.add_argument("--epochs", type=int, default=5)
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--lr", type=float, default=3e-3)
    parser.add_argument("--accum-steps", type=int, default=2)
    parser.add_argument("--max-grad-norm", type=float, default=1.0)
    parser.add_argument("--warmup-steps", type=int, default=10)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--save", type=str, default=None, help="write the final state_dict here")
    parser.add_argument("--no-shuffle", action="store_true")
    args = parser.parse_args()

    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    use_amp = torch.cuda.is_available()

    dataset = make_dataset(256, torch.Generator().manual_seed(31337))
    loader = DataLoader(dataset, batch_size=args.batch_size, shuffle=not args.no_shuffle)

    torch.manual_seed(args.seed)
    model = ResidualMLP(IN_FEATURES).to(device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=0.01)
    scheduler = torch.optim.lr_scheduler.LambdaLR(
        optimizer, lambda step: min(1.0, (step + 1) / args.warmup_steps)
    )
    scaler = torch.amp.GradScaler("cuda", enabled=use_amp)

    optimizer.zero_grad(set_to_none=True)
    for epoch in range(1, args.epochs + 1):
        model.train()
        total_loss, num_batches = 0.0, 0
        for step, (x, y) in enumerate(tqdm(loader, desc=f"epoch {epoch}")):
            x, y = x.to(device, non_blocking=True), y.to(device, non_blocking=True)
            with torch.autocast(device_type=device.type, dtype=torch.float16, enabled=use_amp):
                pred = model(x)
                loss = F.mse_loss(pred.float(), y)
            total_loss += loss.item()
            num_batches += 1
            loss = loss / args.accum_steps
            scaler.scale(loss).backward()

            if (step + 1) % args.accum_steps == 0:
                scaler.unscale_(optimizer)
                torch.nn.utils.clip_grad_norm_(model.parameters(), args.max_grad_norm)
                scaler.step(optimizer)
                scaler.update()
                optimizer.zero_grad(set_to_none=True)
                scheduler.step()

        print(f"epoch {epoch} train_loss {total_loss / num_batches:.4f} lr {scheduler.get_last_lr()[0]:.6f}")

    if args.save:
        torch.save(model.state_dict(), args.save)
        print(f"saved model to {args.save}")


if __name__ == "__main__":
    main()
