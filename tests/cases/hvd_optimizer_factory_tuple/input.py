"""A small GAN whose two optimizers come from one factory of this file, returned as a pair and
unpacked by the caller."""

import torch
import torch.nn as nn
from torch import optim


def build_nets(noise):
    maker = nn.Sequential(nn.Linear(noise, 32), nn.ReLU(), nn.Linear(32, 8))
    judge = nn.Sequential(nn.Linear(8, 32), nn.LeakyReLU(0.2), nn.Linear(32, 1))
    return maker, judge


def make_optimizers(maker, judge, settings):
    return (optim.Adam(maker.parameters(), lr=settings["lr"], betas=(0.5, 0.999)),
            optim.Adam(judge.parameters(), lr=settings["lr"], betas=(0.5, 0.999)))


def main():
    settings = {"lr": 2e-4, "noise": 4, "epochs": 2}
    real = torch.randn(64, 8)
    loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(real), batch_size=16, shuffle=True)
    maker, judge = build_nets(settings["noise"])
    maker_opt, judge_opt = make_optimizers(maker, judge, settings)
    criterion = nn.BCEWithLogitsLoss()
    for epoch in range(settings["epochs"]):
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
            maker_opt.step()
        print(f"epoch {epoch}: judge {judge_loss.item():.3f} maker {maker_loss.item():.3f}")
    torch.save({"maker": maker.state_dict(), "judge": judge.state_dict()}, "gan.pt")


if __name__ == "__main__":
    main()
