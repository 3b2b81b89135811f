# A Trainer built from the model and optimizer loads starting weights in a method called after it
# is built. The DeepSpeed engine is made in __init__, so the load comes after deepspeed.initialize:
# ZeRO-3 refuses it (its weights are empty shards), ZeRO-1/2 undo it at the first step (they step
# their own fp32 copy of the weights made at initialize).
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


class Trainer:
    def __init__(self, model, optimizer, loader):
        self.model = model
        self.optimizer = optimizer

        # DeepSpeed reads its settings from ds_config.json
        with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "ds_config.json")) as config_file:
            ds_config = json.load(config_file)
        self.model, self.optimizer, _, _ = deepspeed.initialize(model=self.model, optimizer=self.optimizer, config=ds_config)
        self.loader = loader

    def load(self, path):
        self.model.module.load_state_dict(torch.load(path, map_location="cpu"))

    def train(self, epochs):
        for epoch in range(epochs):
            self.loader.sampler.set_epoch(epoch)
            for xb, yb in self.loader:
                loss = nn.functional.mse_loss(self.model(xb), yb)
                self.model.backward(loss)
                self.model.step()
            if dist.get_rank() == 0:
                print(f"epoch {epoch} loss {loss.item():.4f}")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--init", type=str, default=None, help="start from these weights")
    parser.add_argument("--local_rank", "--local-rank", type=int, default=-1, help="set by the deepspeed launcher")
    args = parser.parse_args()

    # the deepspeed launcher sets these; plain `python train.py` runs as a single process (port 0: any free one)
    for key, value in dict(RANK="0", LOCAL_RANK="0", WORLD_SIZE="1", MASTER_ADDR="127.0.0.1", MASTER_PORT="0").items():
        os.environ.setdefault(key, value)
    local_rank = int(os.environ["LOCAL_RANK"])
    if torch.cuda.is_available():
        torch.cuda.set_device(local_rank)
    deepspeed.init_distributed(dist_backend="gloo")

    torch.manual_seed(0)
    train_dataset = TensorDataset(torch.randn(256, 8), torch.randn(256, 1))
    loader = DataLoader(train_dataset, batch_size=16, sampler=DistributedSampler(train_dataset, shuffle=True))
    model = nn.Sequential(nn.Linear(8, 32), nn.ReLU(), nn.Linear(32, 1))
    trainer = Trainer(model, torch.optim.SGD(model.parameters(), lr=0.01), loader)
    if args.init:
        trainer.load(args.init)
    trainer.train(2)
    with deepspeed.zero.GatheredParameters(list(trainer.model.module.parameters())):  # ZeRO-3 shards the weights: every rank gathers
        model_state = {name: tensor.detach().cpu().clone() for name, tensor in trainer.model.module.state_dict().items()}
    if dist.get_rank() == 0:
        torch.save(model_state, "model.pt")
    dist.barrier()  # no rank exits while rank 0 still writes its files
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
