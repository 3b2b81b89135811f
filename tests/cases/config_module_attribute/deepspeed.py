"""The model carries its own batch size: `model.batch_size` is an attribute of a module, not a
value the DeepSpeed config is overwritten from; the loader's own batch_size is."""
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


class Regressor(nn.Module):
    def __init__(self):
        super().__init__()
        self.batch_size = 32
        self.net = nn.Linear(8, 1)

    def forward(self, x):
        return self.net(x)


def main():
    # the deepspeed launcher sets these; plain `python train.py` runs as a single process (port 0: any free one)
    for env_key, env_value in dict(RANK="0", LOCAL_RANK="0", WORLD_SIZE="1", MASTER_ADDR="127.0.0.1", MASTER_PORT="0").items():
        os.environ.setdefault(env_key, env_value)
    local_rank = int(os.environ["LOCAL_RANK"])
    if torch.cuda.is_available():
        torch.cuda.set_device(local_rank)
    deepspeed.init_distributed(dist_backend="gloo")

    model = Regressor()
    dataset = TensorDataset(torch.randn(256, 8), torch.randn(256, 1))
    loader = DataLoader(dataset, batch_size=model.batch_size, sampler=DistributedSampler(dataset, shuffle=True))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)

    # DeepSpeed reads its settings from ds_config.json; the values this script computes itself
    # overwrite the file's, so the two never disagree
    with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "ds_config.json")) as config_file:
        ds_config = json.load(config_file)
    ds_config["train_micro_batch_size_per_gpu"] = loader.batch_size
    model, optimizer, _, _ = deepspeed.initialize(model=model, optimizer=optimizer, config=ds_config)
    for epoch in range(3):
        loader.sampler.set_epoch(epoch)
        for x, y in loader:
            loss = nn.functional.mse_loss(model(x), y)
            model.backward(loss)
            model.step()
    with deepspeed.zero.GatheredParameters(list(model.module.parameters())):  # ZeRO-3 shards the weights: every rank gathers
        model_state = {name: tensor.detach().cpu().clone() for name, tensor in model.module.state_dict().items()}
    if dist.get_rank() == 0:
        torch.save(model_state, "regressor.pt")
    dist.barrier()  # no rank exits while rank 0 still writes its files
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
