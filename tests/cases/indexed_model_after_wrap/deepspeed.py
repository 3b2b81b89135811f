"""An nn.Sequential model whose layers are reached by index after training starts."""
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


def main():
    # the deepspeed launcher sets these; plain `python train.py` runs as a single process (port 0: any free one)
    for key, value in dict(RANK="0", LOCAL_RANK="0", WORLD_SIZE="1", MASTER_ADDR="127.0.0.1", MASTER_PORT="0").items():
        os.environ.setdefault(key, value)
    local_rank = int(os.environ["LOCAL_RANK"])
    if torch.cuda.is_available():
        torch.cuda.set_device(local_rank)
    deepspeed.init_distributed(dist_backend="gloo")

    torch.manual_seed(0)
    pairs = TensorDataset(torch.randn(80, 5), torch.randn(80, 1))
    loader = DataLoader(pairs, batch_size=10, sampler=DistributedSampler(pairs, shuffle=True))
    regressor = nn.Sequential(nn.Linear(5, 20), nn.ReLU(), nn.Linear(20, 1))
    optimizer = torch.optim.SGD(regressor.parameters(), lr=0.05)

    # DeepSpeed reads its settings from ds_config.json
    with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "ds_config.json")) as config_file:
        ds_config = json.load(config_file)
    regressor, optimizer, _, _ = deepspeed.initialize(model=regressor, optimizer=optimizer, config=ds_config)
    for epoch in range(2):
        loader.sampler.set_epoch(epoch)
        for features, targets in loader:
            loss = nn.functional.mse_loss(regressor(features), targets)
            regressor.backward(loss)
            regressor.step()
        if dist.get_rank() == 0:
            print(f"epoch {epoch}: output bias {regressor.module[-1].bias.item():.4f}")
    first = regressor.module[0]
    if dist.get_rank() == 0:
        print("first layer weight norm", first.weight.norm().item())
        torch.save(regressor.module[2].state_dict(), "head.pt")
    dist.barrier()  # no rank exits while rank 0 still writes its files
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
