"""A small GAN whose two optimizers come from one factory of this file, returned as a pair and
unpacked by the caller."""
import copy
import json
import os

import torch
import torch.nn as nn
from torch import optim

# the script keeps its model and batches on the CPU, so DeepSpeed does too (it picks its device
# when imported); move them to a GPU to train there
os.environ.setdefault("DS_ACCELERATOR", "cpu")
import deepspeed
from torch.utils.data.distributed import DistributedSampler
import torch.distributed as dist


def build_nets(noise):
    maker = nn.Sequential(nn.Linear(noise, 32), nn.ReLU(), nn.Linear(32, 8))
    judge = nn.Sequential(nn.Linear(8, 32), nn.LeakyReLU(0.2), nn.Linear(32, 1))
    return maker, judge


def make_optimizers(maker, judge, settings):
    return (optim.Adam(maker.parameters(), lr=settings["lr"], betas=(0.5, 0.999)),
            optim.Adam(judge.parameters(), lr=settings["lr"], betas=(0.5, 0.999)))


def main():
    # the deepspeed launcher sets these; plain `python train.py` runs as a single process (port 0: any free one)
    for key, value in dict(RANK="0", LOCAL_RANK="0", WORLD_SIZE="1", MASTER_ADDR="127.0.0.1", MASTER_PORT="0").items():
        os.environ.setdefault(key, value)
    local_rank = int(os.environ["LOCAL_RANK"])
    if torch.cuda.is_available():
        torch.cuda.set_device(local_rank)
    deepspeed.init_distributed(dist_backend="gloo")

    settings = {"lr": 2e-4, "noise": 4, "epochs": 2}
    real = torch.randn(64, 8)
    train_dataset = torch.utils.data.TensorDataset(real)
    loader = torch.utils.data.DataLoader(train_dataset, batch_size=16, sampler=DistributedSampler(train_dataset, shuffle=True))
    maker, judge = build_nets(settings["noise"])
    maker_opt, judge_opt = make_optimizers(maker, judge, settings)

    # DeepSpeed reads its settings from ds_config.json
    with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "ds_config.json")) as config_file:
        ds_config = json.load(config_file)
    # one engine per model and its own optimizer, each with its own copy of the settings
    maker, maker_opt, _, _ = deepspeed.initialize(model=maker, optimizer=maker_opt, config=copy.deepcopy(ds_config))
    judge, judge_opt, _, _ = deepspeed.initialize(model=judge, optimizer=judge_opt, config=copy.deepcopy(ds_config))
    criterion = nn.BCEWithLogitsLoss()
    for epoch in range(settings["epochs"]):
        loader.sampler.set_epoch(epoch)
        for (batch,) in loader:
            fake = maker(torch.randn(batch.size(0), settings["noise"]))
            judge_loss = criterion(judge(batch), torch.ones(batch.size(0), 1)) + \
                criterion(judge(fake.detach()), torch.zeros(batch.size(0), 1))
            judge.backward(judge_loss)
            judge.step()

            # maker's backward must not reach judge's engine: judge runs as its plain module here, and
            # its weights take no gradient (the original clears them before judge's next step anyway)
            judge.module.requires_grad_(False)
            maker_loss = criterion(judge.module(fake), torch.ones(batch.size(0), 1))
            maker.backward(maker_loss)
            judge.module.requires_grad_(True)
            maker.step()
        if dist.get_rank() == 0:
            print(f"epoch {epoch}: judge {judge_loss.item():.3f} maker {maker_loss.item():.3f}")
    with deepspeed.zero.GatheredParameters(list(maker.module.parameters())):  # ZeRO-3 shards the weights: every rank gathers
        maker_state = {name: tensor.detach().cpu().clone() for name, tensor in maker.module.state_dict().items()}
    with deepspeed.zero.GatheredParameters(list(judge.module.parameters())):  # ZeRO-3 shards the weights: every rank gathers
        judge_state = {name: tensor.detach().cpu().clone() for name, tensor in judge.module.state_dict().items()}
    if dist.get_rank() == 0:
        torch.save({"maker": maker_state, "judge": judge_state}, "gan.pt")
    dist.barrier()  # no rank exits while rank 0 still writes its files
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
