# Evaluation under @torch.inference_mode() between training epochs. Under ZeRO-3 the weights are
# gathered inside the evaluation's forwards, as inference tensors that DeepSpeed may keep for the
# next training forward, which then cannot save them for backward.
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


@torch.no_grad()  # not inference_mode: under ZeRO-3 the weights it gathers would become inference tensors
def evaluate(model, x, y):
    model.eval()
    loss = nn.functional.mse_loss(model(x), y).item()
    model.train()
    return loss


def main():
    # the deepspeed launcher sets these; plain `python train.py` runs as a single process (port 0: any free one)
    for key, value in dict(RANK="0", LOCAL_RANK="0", WORLD_SIZE="1", MASTER_ADDR="127.0.0.1", MASTER_PORT="0").items():
        os.environ.setdefault(key, value)
    local_rank = int(os.environ["LOCAL_RANK"])
    if torch.cuda.is_available():
        torch.cuda.set_device(local_rank)
    deepspeed.init_distributed(dist_backend="gloo")

    torch.manual_seed(0)
    train_dataset = TensorDataset(torch.randn(256, 8), torch.randn(256, 1))
    loader = DataLoader(train_dataset, batch_size=16, sampler=DistributedSampler(train_dataset, shuffle=True))
    val_x, val_y = torch.randn(64, 8), torch.randn(64, 1)
    model = nn.Sequential(nn.Linear(8, 32), nn.ReLU(), nn.Linear(32, 1))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)

    # DeepSpeed reads its settings from ds_config.json
    with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "ds_config.json")) as config_file:
        ds_config = json.load(config_file)
    model, optimizer, _, _ = deepspeed.initialize(model=model, optimizer=optimizer, config=ds_config)
    for epoch in range(2):
        loader.sampler.set_epoch(epoch)
        for xb, yb in loader:
            loss = nn.functional.mse_loss(model(xb), yb)
            model.backward(loss)
            model.step()
        val_loss = evaluate(model, val_x, val_y)
        if dist.get_rank() == 0:
            print(f"epoch {epoch} val_loss {val_loss:.4f}")
    dist.barrier()  # no rank exits while rank 0 still writes its files
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
