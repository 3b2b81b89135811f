import sys
from pathlib import Path

import numpy as np
import torch
import torch.nn as nn
from PIL import Image


def main():
    out = Path("runs")
    out.mkdir(parents=True, exist_ok=True)
    model = nn.Linear(4, 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for step in range(5):
        loss = model(torch.randn(8, 4)).pow(2).mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        sys.stdout.write(f"{loss.item()}\n")
    np.save(out / "w.npy", model.weight.detach().numpy())
    (out / "done.txt").write_text("ok")
    img = Image.fromarray(np.zeros((4, 4), dtype=np.uint8))
    img.save(out / "w.png")


if __name__ == "__main__":
    main()
