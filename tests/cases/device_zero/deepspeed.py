import argparse
import json
import os

import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset
import deepspeed
from torch.utils.data.distributed import DistributedSampler
import torch.distributed as dist


def get_loader(batch_size):
    # toy sequence data: predict the sum of a random sequence
    seqs = torch.randn(4096, 16, 8)
    targets = seqs.sum(dim=(1, 2)).unsqueeze(-1)
    train_dataset = TensorDataset(seqs, targets)
    return DataLoader(train_dataset, batch_size=batch_size, sampler=DistributedSampler(train_dataset, shuffle=True))


class GRURegressor(nn.Module):
    def __init__(self, input_size=8, hidden_size=64):
        super().__init__()
        self.rnn = nn.GRU(input_size, hidden_size, batch_first=True)
        self.out = nn.Linear(hidden_size, 1)

    def forward(self, x):
        _, h = self.rnn(x)
        return self.out(h[-1])


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--epochs", type=int, default=8)
    parser.add_argument("--bs", type=int, default=32)
    parser.add_argument("--lr", type=float, default=1e-3)
    parser.add_argument("--local_rank", "--local-rank", type=int, default=-1, help="set by the deepspeed launcher")
    args = parser.parse_args()

    # the deepspeed launcher sets these; plain `python train.py` runs as a single process (port 0: any free one)
    for key, value in dict(RANK="0", LOCAL_RANK="0", WORLD_SIZE="1", MASTER_ADDR="127.0.0.1", MASTER_PORT="0").items():
        os.environ.setdefault(key, value)
    local_rank = int(os.environ["LOCAL_RANK"])
    if torch.cuda.is_available():
        torch.cuda.set_device(local_rank)
    deepspeed.init_distributed(dist_backend="nccl" if torch.cuda.is_available() else "gloo")

    device = local_rank if torch.cuda.is_available() else "cpu"  # just use the first GPU

    loader = get_loader(args.bs)
    model = GRURegressor().to(device)
    optimizer = torch.optim.Adam(model.parameters(), lr=args.lr)

    # DeepSpeed reads its settings from ds_config.json; the values this script computes itself
    # overwrite the file's, so the two never disagree
    with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "ds_config.json")) as config_file:
        ds_config = json.load(config_file)
    ds_config["train_micro_batch_size_per_gpu"] = loader.batch_size
    model, optimizer, _, _ = deepspeed.initialize(model=model, optimizer=optimizer, config=ds_config)
    loss_fn = nn.SmoothL1Loss()

    for epoch in range(args.epochs):
        loader.sampler.set_epoch(epoch)
        losses = []
        for seq, target in loader:
            seq = seq.to(device)
            target = target.to(device)

            pred = model(seq)
            loss = loss_fn(pred, target)

            model.backward(loss)
            model.step()
            losses.append(loss.item())

        if dist.get_rank() == 0:
            print(f"epoch {epoch}: mean loss {sum(losses) / len(losses):.4f}")

    with deepspeed.zero.GatheredParameters(list(model.module.parameters())):  # ZeRO-3 shards the weights: every rank gathers
        model_state = {name: tensor.detach().cpu().clone() for name, tensor in model.module.state_dict().items()}
    if dist.get_rank() == 0:
        torch.save(model_state, "gru.pt")
    dist.barrier()  # no rank exits while rank 0 still writes its files
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
