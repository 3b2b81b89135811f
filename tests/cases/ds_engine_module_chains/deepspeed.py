"""Uses what model.eval() and model.train() return: the module itself, in plain PyTorch."""
import json
import os
import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset
import deepspeed
from torch.utils.data.distributed import DistributedSampler
import torch.distributed as dist


def mean_error(net, data):
    with torch.no_grad():
        return sum(nn.functional.l1_loss(net(x), y).item() for x, y in data) / len(data)


def main():
    # the deepspeed launcher sets these; plain `python train.py` runs as a single process (port 0: any free one)
    for key, value in dict(RANK="0", LOCAL_RANK="0", WORLD_SIZE="1", MASTER_ADDR="127.0.0.1", MASTER_PORT="0").items():
        os.environ.setdefault(key, value)
    local_rank = int(os.environ["LOCAL_RANK"])
    if torch.cuda.is_available():
        torch.cuda.set_device(local_rank)
    deepspeed.init_distributed(dist_backend="nccl" if torch.cuda.is_available() else "gloo")

    device = "cuda" if torch.cuda.is_available() else "cpu"
    samples = TensorDataset(torch.randn(128, 3), torch.randn(128, 2))
    loader = DataLoader(samples, batch_size=16, sampler=DistributedSampler(samples, shuffle=True))
    model = nn.Sequential(nn.Linear(3, 12), nn.GELU(), nn.Linear(12, 2)).to(device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3)

    # DeepSpeed reads its settings from ds_config.json
    with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "ds_config.json")) as config_file:
        ds_config = json.load(config_file)
    model, optimizer, _, _ = deepspeed.initialize(model=model, optimizer=optimizer, config=ds_config)
    for epoch in range(3):
        loader.sampler.set_epoch(epoch)
        model.module.train().to(device)
        for x, y in loader:
            x, y = x.to(device), y.to(device)
            loss = nn.functional.l1_loss(model(x), y)
            model.backward(loss)
            model.step()
        error = mean_error(model.module.eval(), loader)
        if dist.get_rank() == 0:
            print(f"epoch {epoch}: error {error:.4f}")
    model.module.eval().cpu()
    with deepspeed.zero.GatheredParameters(list(model.module.parameters())):  # ZeRO-3 shards the weights: every rank gathers
        model_state = {name: tensor.detach().cpu().clone() for name, tensor in model.module.state_dict().items()}
    if dist.get_rank() == 0:
        torch.save(model_state, "chains.pt")
    dist.barrier()  # no rank exits while rank 0 still writes its files
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
