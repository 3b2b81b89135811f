"""Sequence classifier; the GPU is picked by number (--gpu), the way many research scripts do."""
import argparse
import json
import os

import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset
import deepspeed
from torch.utils.data.distributed import DistributedSampler
import torch.distributed as dist

NUM_GPUS = 1


class Classifier(nn.Module):
    def __init__(self, vocab, classes):
        super().__init__()
        self.embed = nn.EmbeddingBag(vocab, 64)
        self.head = nn.Linear(64, classes)

    def forward(self, tokens):
        return self.head(self.embed(tokens))


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--gpu", type=int, default=0)
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--resume", default="")
    parser.add_argument("--local_rank", "--local-rank", type=int, default=-1, help="set by the deepspeed launcher")
    args = parser.parse_args()

    # the deepspeed launcher sets these; plain `python train.py` runs as a single process (port 0: any free one)
    for key, value in dict(RANK="0", LOCAL_RANK="0", WORLD_SIZE="1", MASTER_ADDR="127.0.0.1", MASTER_PORT="0").items():
        os.environ.setdefault(key, value)
    local_rank = int(os.environ["LOCAL_RANK"])
    if torch.cuda.is_available():
        torch.cuda.set_device(local_rank)
    deepspeed.init_distributed(dist_backend="nccl" if torch.cuda.is_available() else "gloo")

    device = torch.device(f"cuda:{local_rank}" if torch.cuda.is_available() else "cpu")

    tokens = torch.randint(0, 1000, (1024, 12))
    labels = torch.randint(0, 4, (1024,))
    train_dataset = TensorDataset(tokens, labels)
    loader = DataLoader(train_dataset, batch_size=64 * NUM_GPUS, sampler=DistributedSampler(train_dataset, shuffle=True))
    model = Classifier(1000, 4).to(device)
    if args.resume:
        model.load_state_dict(torch.load(args.resume, map_location=device))
    criterion = nn.CrossEntropyLoss(weight=torch.ones(4)).to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)

    # DeepSpeed reads its settings from ds_config.json; the values this script computes itself
    # overwrite the file's, so the two never disagree
    with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "ds_config.json")) as config_file:
        ds_config = json.load(config_file)
    ds_config["train_micro_batch_size_per_gpu"] = 64 * NUM_GPUS
    model, optimizer, _, _ = deepspeed.initialize(model=model, optimizer=optimizer, config=ds_config)

    for epoch in range(args.epochs):
        loader.sampler.set_epoch(epoch)
        for x, y in loader:
            x, y = x.to(device), y.to(device)
            loss = criterion(model(x), y)
            model.backward(loss)
            model.step()
        if dist.get_rank() == 0:
            print(f"epoch {epoch} loss {loss.item():.3f}")
    with deepspeed.zero.GatheredParameters(list(model.module.parameters())):  # ZeRO-3 shards the weights: every rank gathers
        model_state = {name: tensor.detach().cpu().clone() for name, tensor in model.module.state_dict().items()}
    if dist.get_rank() == 0:
        torch.save(model_state, "classifier.pt")
    dist.barrier()  # no rank exits while rank 0 still writes its files
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
