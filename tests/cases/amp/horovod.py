import argparse

import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset
import horovod.torch as hvd
from torch.utils.data.distributed import DistributedSampler


class TinyTransformer(nn.Module):
    def __init__(self, vocab=1000, d_model=128, n_classes=5):
        super().__init__()
        self.emb = nn.Embedding(vocab, d_model)
        layer = nn.TransformerEncoderLayer(d_model, nhead=4, batch_first=True)
        self.encoder = nn.TransformerEncoder(layer, num_layers=2)
        self.cls = nn.Linear(d_model, n_classes)

    def forward(self, tokens):
        h = self.encoder(self.emb(tokens))
        return self.cls(h.mean(dim=1))


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--epochs", type=int, default=4)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--lr", type=float, default=5e-4)
    args = parser.parse_args()

    hvd.init()
    local_rank = hvd.local_rank()
    if torch.cuda.is_available():
        torch.cuda.set_device(local_rank)

    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")

    tokens = torch.randint(0, 1000, (4000, 64))
    labels = torch.randint(0, 5, (4000,))
    train_dataset = TensorDataset(tokens, labels)
    loader = DataLoader(train_dataset, batch_size=args.batch_size, sampler=DistributedSampler(train_dataset, num_replicas=hvd.size(), rank=hvd.rank(), shuffle=True))

    model = TinyTransformer().to(device)
    hvd.broadcast_parameters(model.state_dict(), root_rank=0)  # every rank starts from rank 0's weights
    optimizer = torch.optim.AdamW(model.parameters(), lr=args.lr * hvd.size())
    optimizer = hvd.DistributedOptimizer(optimizer, named_parameters=model.named_parameters())
    criterion = nn.CrossEntropyLoss()
    scaler = torch.cuda.amp.GradScaler()

    for epoch in range(args.epochs):
        loader.sampler.set_epoch(epoch)
        for batch_idx, (tok, lab) in enumerate(loader):
            tok, lab = tok.to(device), lab.to(device)
            optimizer.zero_grad()

            # mixed precision forward pass
            with torch.autocast("cuda"):
                logits = model(tok)
                loss = criterion(logits, lab)

            scaler.scale(loss).backward()
            with optimizer.skip_synchronize():
                optimizer.synchronize()  # average the gradients across ranks before they are read
                scaler.step(optimizer)
            scaler.update()

            if batch_idx % 25 == 0 and hvd.rank() == 0:
                print(f"epoch {epoch} batch {batch_idx} loss {loss.item():.4f} scale {scaler.get_scale():.0f}")

    if hvd.rank() == 0:
        torch.save(model.state_dict(), "tiny_transformer_amp.pt")
    hvd.barrier()  # no rank exits while rank 0 still writes its files
    hvd.shutdown()


if __name__ == "__main__":
    main()
