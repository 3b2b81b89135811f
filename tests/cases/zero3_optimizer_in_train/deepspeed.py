"""The model is built in main() and handed to train(), which builds the optimizer and trains it."""
import argparse
import json
import os

import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset

# the script keeps its model and batches on the CPU, so DeepSpeed does too (it picks its device
# when imported); move them to a GPU to train there
os.environ.setdefault("DS_ACCELERATOR", "cpu")
import deepspeed
from torch.utils.data.distributed import DistributedSampler
import torch.distributed as dist


def train(model, loader, epochs):
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2)

    # DeepSpeed reads its settings from ds_config.json; the values this script computes itself
    # overwrite the file's, so the two never disagree
    with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "ds_config.json")) as config_file:
        ds_config = json.load(config_file)
    ds_config["train_micro_batch_size_per_gpu"] = loader.batch_size
    model, optimizer, _, _ = deepspeed.initialize(model=model, optimizer=optimizer, config=ds_config)
    for epoch in range(epochs):
        for features, labels in loader:
            loss = nn.functional.cross_entropy(model(features), labels)
            model.backward(loss)
            model.step()
        if dist.get_rank() == 0:
            print(f"epoch {epoch} loss {loss.item():.4f}")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--local_rank", "--local-rank", type=int, default=-1, help="set by the deepspeed launcher")
    args = parser.parse_args()

    # the deepspeed launcher sets these; plain `python train.py` runs as a single process (port 0: any free one)
    for key, value in dict(RANK="0", LOCAL_RANK="0", WORLD_SIZE="1", MASTER_ADDR="127.0.0.1", MASTER_PORT="0").items():
        os.environ.setdefault(key, value)
    local_rank = int(os.environ["LOCAL_RANK"])
    if torch.cuda.is_available():
        torch.cuda.set_device(local_rank)
    deepspeed.init_distributed(dist_backend="gloo")
    generator = torch.Generator().manual_seed(3)
    data = TensorDataset(torch.randn(256, 12, generator=generator), torch.randint(0, 3, (256,), generator=generator))
    loader = DataLoader(data, batch_size=args.batch_size, sampler=DistributedSampler(data, shuffle=False))
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(12, 32), nn.ReLU(), nn.Linear(32, 3))
    train(model, loader, epochs=2)
    with deepspeed.zero.GatheredParameters(list(model.parameters())):  # ZeRO-3 shards the weights: every rank gathers
        model_state = {name: tensor.detach().cpu().clone() for name, tensor in model.state_dict().items()}
    if dist.get_rank() == 0:
        torch.save(model_state, "classifier.pt")
    dist.barrier()  # no rank exits while rank 0 still writes its files
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
