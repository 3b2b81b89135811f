"""A plain CPU classifier: the network is never moved, and its batches come straight from the loader."""
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


class CNN(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(1, 4, 3, padding=1)
        self.out = nn.Linear(4 * 8 * 8, 10)

    def forward(self, x):
        return self.out(torch.relu(self.conv(x)).flatten(1))


def main():
    # the deepspeed launcher sets these; plain `python train.py` runs as a single process (port 0: any free one)
    for key, value in dict(RANK="0", LOCAL_RANK="0", WORLD_SIZE="1", MASTER_ADDR="127.0.0.1", MASTER_PORT="0").items():
        os.environ.setdefault(key, value)
    local_rank = int(os.environ["LOCAL_RANK"])
    if torch.cuda.is_available():
        torch.cuda.set_device(local_rank)
    deepspeed.init_distributed(dist_backend="gloo")

    images = TensorDataset(torch.randn(96, 1, 8, 8), torch.randint(0, 10, (96,)))
    loader = DataLoader(images, batch_size=12, sampler=DistributedSampler(images, shuffle=True))
    cnn = CNN()
    optimizer = torch.optim.Adam(cnn.parameters(), lr=1e-3)

    # DeepSpeed reads its settings from ds_config.json
    with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "ds_config.json")) as config_file:
        ds_config = json.load(config_file)
    cnn, optimizer, _, _ = deepspeed.initialize(model=cnn, optimizer=optimizer, config=ds_config)
    for epoch in range(2):
        loader.sampler.set_epoch(epoch)
        for step, (x, y) in enumerate(loader):
            output = cnn(x)
            loss = nn.functional.cross_entropy(output, y)
            cnn.backward(loss)
            cnn.step()
            if step % 4 == 0:
                predicted = torch.max(output, 1)[1].data.numpy()
                if dist.get_rank() == 0:
                    print(epoch, loss.item(), (predicted == y.data.numpy()).mean())
    dist.barrier()  # no rank exits while rank 0 still writes its files
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
