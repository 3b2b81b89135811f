import argparse
import os

import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset
import torch.distributed as dist
from torch.distributed.fsdp import fully_shard
from torch.utils.data.distributed import DistributedSampler
from torch.distributed.fsdp.sharded_grad_scaler import ShardedGradScaler
from torch.distributed.checkpoint.state_dict import get_model_state_dict, StateDictOptions


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

    # torchrun sets these; plain `python train.py` runs as a single process (port 0: any free one)
    for key, value in dict(RANK="0", LOCAL_RANK="0", WORLD_SIZE="1", MASTER_ADDR="127.0.0.1", MASTER_PORT="0").items():
        os.environ.setdefault(key, value)
    local_rank = int(os.environ["LOCAL_RANK"])
    if torch.cuda.is_available():
        torch.cuda.set_device(local_rank)
    dist.init_process_group("cpu:gloo,cuda:nccl" if torch.cuda.is_available() else "gloo")

    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")

    tokens = torch.randint(0, 1000, (4000, 64))
    labels = torch.randint(0, 5, (4000,))
    train_dataset = TensorDataset(tokens, labels)
    loader = DataLoader(train_dataset, batch_size=args.batch_size, sampler=DistributedSampler(train_dataset, shuffle=True))

    model = TinyTransformer().to(device)
    for submodule in model.modules():  # each block's weights are gathered only while it runs
        if isinstance(submodule, torch.nn.TransformerEncoderLayer):
            fully_shard(submodule)
    fully_shard(model)
    optimizer = torch.optim.AdamW(model.parameters(), lr=args.lr)
    criterion = nn.CrossEntropyLoss()
    scaler = ShardedGradScaler(device="cuda")

    for epoch in range(args.epochs):
        loader.sampler.set_epoch(epoch)
        for batch_idx, (tok, lab) in enumerate(loader):
            tok, lab = tok.to(device), lab.to(device)
            optimizer.zero_grad(set_to_none=True)

            # mixed precision forward pass
            with torch.autocast("cuda"):
                logits = model(tok)
                loss = criterion(logits, lab)

            scaler.scale(loss).backward()
            scaler.step(optimizer)
            scaler.update()

            if batch_idx % 25 == 0 and dist.get_rank() == 0:
                print(f"epoch {epoch} batch {batch_idx} loss {loss.item():.4f} scale {scaler.get_scale():.0f}")

    model_state = get_model_state_dict(model, options=StateDictOptions(full_state_dict=True, cpu_offload=True))  # every rank gathers; rank 0 gets the full weights
    if dist.get_rank() == 0:
        torch.save(model_state, "tiny_transformer_amp.pt")
    dist.barrier()  # no rank exits while rank 0 still writes its files
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
