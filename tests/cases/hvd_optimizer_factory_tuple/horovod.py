"""A small GAN whose two optimizers come from one factory of this file, returned as a pair and
unpacked by the caller."""

import torch
import torch.nn as nn
from torch import optim
import horovod.torch as hvd
from torch.utils.data.distributed import DistributedSampler


def build_nets(noise):
    maker = nn.Sequential(nn.Linear(noise, 32), nn.ReLU(), nn.Linear(32, 8))
    judge = nn.Sequential(nn.Linear(8, 32), nn.LeakyReLU(0.2), nn.Linear(32, 1))
    return maker, judge


def make_optimizers(maker, judge, settings):
    return (optim.Adam(maker.parameters(), lr=settings["lr"] * hvd.size(), betas=(0.5, 0.999)),
            optim.Adam(judge.parameters(), lr=settings["lr"] * hvd.size(), betas=(0.5, 0.999)))


def main():
    hvd.init()
    local_rank = hvd.local_rank()
    if torch.cuda.is_available():
        torch.cuda.set_device(local_rank)

    settings = {"lr": 2e-4, "noise": 4, "epochs": 2}
    real = torch.randn(64, 8)
    train_dataset = torch.utils.data.TensorDataset(real)
    loader = torch.utils.data.DataLoader(train_dataset, batch_size=16, sampler=DistributedSampler(train_dataset, num_replicas=hvd.size(), rank=hvd.rank(), shuffle=True))
    maker, judge = build_nets(settings["noise"])
    maker_opt, judge_opt = make_optimizers(maker, judge, settings)
    judge_opt = hvd.DistributedOptimizer(judge_opt, named_parameters=judge.named_parameters(prefix="judge"))
    maker_opt = hvd.DistributedOptimizer(maker_opt, named_parameters=maker.named_parameters(prefix="maker"))
    hvd.broadcast_parameters(maker.state_dict(), root_rank=0)  # every rank starts from rank 0's weights
    hvd.broadcast_parameters(judge.state_dict(), root_rank=0)  # every rank starts from rank 0's weights
    criterion = nn.BCEWithLogitsLoss()
    for epoch in range(settings["epochs"]):
        loader.sampler.set_epoch(epoch)
        for (batch,) in loader:
            fake = maker(torch.randn(batch.size(0), settings["noise"]))
            judge_opt.zero_grad()
            judge_loss = criterion(judge(batch), torch.ones(batch.size(0), 1)) + \
                criterion(judge(fake.detach()), torch.zeros(batch.size(0), 1))
            judge_loss.backward()
            judge_opt.step()

            maker_opt.zero_grad()
            maker_loss = criterion(judge(fake), torch.ones(batch.size(0), 1))
            maker_loss.backward()
            judge_opt.synchronize()  # this backward reached judge: finish its all-reduces before the next one
            maker_opt.step()
        if hvd.rank() == 0:
            print(f"epoch {epoch}: judge {judge_loss.item():.3f} maker {maker_loss.item():.3f}")
    if hvd.rank() == 0:
        torch.save({"maker": maker.state_dict(), "judge": judge.state_dict()}, "gan.pt")
    hvd.barrier()  # no rank exits while rank 0 still writes its files
    hvd.shutdown()


if __name__ == "__main__":
    main()
