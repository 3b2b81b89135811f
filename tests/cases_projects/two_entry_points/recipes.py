"""Fine-tuning recipes: freeze the body, train the head (through engine.fit)."""

import torch

from engine import fit


def finetune_head(model, batches, epochs=2):
    for parameter in model[0].parameters():
        parameter.requires_grad_(False)
    optimizer = torch.optim.SGD(model[-1].parameters(), lr=0.05)
    return fit(model, batches, optimizer, epochs)
