"""A small GAN whose generator and its optimizer come back from a resume helper of another module:
the optimizer is bound twice, and the second binding is the one the conversion cannot follow."""
import argparse

import torch
import torch.nn as nn

from checkpoints import restore


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--resume", default="")
    args = parser.parse_args()
    gen, disc = nn.Linear(8, 8), nn.Linear(8, 1)
    gen_opt = torch.optim.Adam(gen.parameters(), lr=2e-4)
    disc_opt = torch.optim.Adam(disc.parameters(), lr=2e-4)
    if args.resume:
        gen, gen_opt = restore(gen, gen_opt, args.resume)
    real = torch.utils.data.DataLoader(torch.randn(128, 8), batch_size=16, shuffle=True)
    for epoch in range(3):
        for batch in real:
            fake = gen(torch.randn_like(batch))
            disc_opt.zero_grad()
            disc_loss = disc(fake.detach()).mean() - disc(batch).mean()
            disc_loss.backward()
            disc_opt.step()
            gen_opt.zero_grad()
            gen_loss = -disc(fake).mean()
            gen_loss.backward()
            gen_opt.step()


if __name__ == "__main__":
    main()
