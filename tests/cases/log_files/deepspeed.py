"""Plain-text logs: a CSV appended every epoch, loss curves rewritten whole, predictions dumped."""
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

    data = TensorDataset(torch.randn(200, 5), torch.randn(200, 1))
    loader = DataLoader(data, batch_size=20, sampler=DistributedSampler(data, shuffle=True))
    model = nn.Linear(5, 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05)

    # DeepSpeed reads its settings from ds_config.json
    with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "ds_config.json")) as config_file:
        ds_config = json.load(config_file)
    model, optimizer, _, _ = deepspeed.initialize(model=model, optimizer=optimizer, config=ds_config)

    if dist.get_rank() == 0:
        log = open("train_log.csv", "w")
        log.write("epoch,loss\n")
    losses = []
    for epoch in range(4):
        loader.sampler.set_epoch(epoch)
        for x, y in loader:
            loss = nn.functional.mse_loss(model(x), y)
            model.backward(loss)
            model.step()
        losses.append(loss.item())
        if dist.get_rank() == 0:
            log.write(f"{epoch},{loss.item():.5f}\n")
            log.flush()

        if dist.get_rank() == 0:
            f = open("losses.txt", "w")
            f.write(str(losses))
            f.close()
    if dist.get_rank() == 0:
        log.close()

    with open("predictions.txt", mode="w") as out:
        for x, _ in loader:
            out.write(f"{model(x).mean().item():.4f}\n")
    dist.barrier()  # no rank exits while rank 0 still writes its files
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
