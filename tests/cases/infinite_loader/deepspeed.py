import json
import os
import torch
from torch.utils.data import DataLoader, TensorDataset

# the script keeps its model and batches on the CPU, so DeepSpeed does too (it picks its device
# when imported); move them to a GPU to train there
os.environ.setdefault("DS_ACCELERATOR", "cpu")
import deepspeed
from torch.utils.data.distributed import DistributedSampler
import torch.distributed as dist

def infinite(loader):
    while True:
        for batch in loader:
            yield batch

def main():
    # the deepspeed launcher sets these; plain `python train.py` runs as a single process (port 0: any free one)
    for key, value in dict(RANK="0", LOCAL_RANK="0", WORLD_SIZE="1", MASTER_ADDR="127.0.0.1", MASTER_PORT="0").items():
        os.environ.setdefault(key, value)
    local_rank = int(os.environ["LOCAL_RANK"])
    if torch.cuda.is_available():
        torch.cuda.set_device(local_rank)
    deepspeed.init_distributed(dist_backend="gloo")

    ds = TensorDataset(torch.randn(64, 3), torch.randn(64, 1))
    loader = DataLoader(ds, batch_size=8, sampler=DistributedSampler(ds, shuffle=True))
    model = torch.nn.Linear(3, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)

    # DeepSpeed reads its settings from ds_config.json
    with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "ds_config.json")) as config_file:
        ds_config = json.load(config_file)
    model, opt, _, _ = deepspeed.initialize(model=model, optimizer=opt, config=ds_config)
    batches = infinite(loader)
    for it in range(100):
        x, y = next(batches)
        loss = ((model(x) - y) ** 2).mean()
        model.backward(loss)
        model.step()
    with deepspeed.zero.GatheredParameters(list(model.module.parameters())):  # ZeRO-3 shards the weights: every rank gathers
        model_state = {name: tensor.detach().cpu().clone() for name, tensor in model.module.state_dict().items()}
    if dist.get_rank() == 0:
        torch.save(model_state, "m.pt")
    dist.barrier()  # no rank exits while rank 0 still writes its files
    dist.destroy_process_group()

if __name__ == "__main__":
    main()
