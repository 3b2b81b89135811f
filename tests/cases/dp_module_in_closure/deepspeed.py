"""A regressor wrapped in nn.DataParallel whose helpers, nested in main(), read the module
through `.module`: one defined before the wrap, one after it, and a lambda."""
import json
import os

import torch
import torch.nn as nn

# the script keeps its model and batches on the CPU, so DeepSpeed does too (it picks its device
# when imported); move them to a GPU to train there
os.environ.setdefault("DS_ACCELERATOR", "cpu")
import deepspeed
from torch.utils.data.distributed import DistributedSampler
import torch.distributed as dist


class Regressor(nn.Module):
    def __init__(self, features, outputs):
        super().__init__()
        self.trunk = nn.Linear(features, 16)
        self.head = nn.Linear(16, outputs)
        self.outputs = outputs

    def forward(self, x):
        return self.head(torch.relu(self.trunk(x)))


def main():
    # the deepspeed launcher sets these; plain `python train.py` runs as a single process (port 0: any free one)
    for key, value in dict(RANK="0", LOCAL_RANK="0", WORLD_SIZE="1", MASTER_ADDR="127.0.0.1", MASTER_PORT="0").items():
        os.environ.setdefault(key, value)
    local_rank = int(os.environ["LOCAL_RANK"])
    if torch.cuda.is_available():
        torch.cuda.set_device(local_rank)
    deepspeed.init_distributed(dist_backend="gloo")

    net = Regressor(6, 3)
    samples = torch.utils.data.TensorDataset(torch.randn(96, 6), torch.randn(96, 3))
    batches = torch.utils.data.DataLoader(samples, batch_size=12, sampler=DistributedSampler(samples, shuffle=True))
    opt = torch.optim.Adam(net.parameters(), lr=1e-3)

    def checkpoint(path):
        with deepspeed.zero.GatheredParameters(list(net.module.parameters())):  # ZeRO-3 shards the weights: every rank gathers
            net_state = {name: tensor.detach().cpu().clone() for name, tensor in net.module.state_dict().items()}
        if dist.get_rank() == 0:
            torch.save({"weights": net_state, "outputs": net.module.outputs}, path)

    # DeepSpeed reads its settings from ds_config.json
    with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "ds_config.json")) as config_file:
        ds_config = json.load(config_file)
    net, opt, _, _ = deepspeed.initialize(model=net, optimizer=opt, config=ds_config)

    def report(epoch, total):
        if dist.get_rank() == 0:
            print(f"epoch {epoch}: loss {total:.4f} over {net.module.outputs} outputs")

    width = lambda: net.module.head.out_features
    for epoch in range(3):
        batches.sampler.set_epoch(epoch)
        total = 0.0
        for inputs, targets in batches:
            loss = nn.functional.mse_loss(net(inputs), targets)
            net.backward(loss)
            net.step()
            total += loss.item()
        report(epoch, total)
        checkpoint("regressor.pt")
    if dist.get_rank() == 0:
        print("head width", width())
    dist.barrier()  # no rank exits while rank 0 still writes its files
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
