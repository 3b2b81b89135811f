import json
import os
import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset
import deepspeed
from torch.utils.data.distributed import DistributedSampler
import torch.distributed as dist

# hyper-parameters
BATCH_SIZE = 64
LR = 3e-4
EPOCHS = 10
HIDDEN = 256
CHECKPOINT_PATH = "mlp.pt"


def make_dataset(n=20000, dim=64, n_classes=10):
    x = torch.randn(n, dim)
    y = torch.randint(0, n_classes, (n,))
    return TensorDataset(x, y)


def build_model(dim=64, n_classes=10):
    return nn.Sequential(
        nn.Linear(dim, HIDDEN),
        nn.GELU(),
        nn.Dropout(0.1),
        nn.Linear(HIDDEN, n_classes),
    )


def main():
    # the deepspeed launcher sets these; plain `python train.py` runs as a single process (port 0: any free one)
    for key, value in dict(RANK="0", LOCAL_RANK="0", WORLD_SIZE="1", MASTER_ADDR="127.0.0.1", MASTER_PORT="0").items():
        os.environ.setdefault(key, value)
    local_rank = int(os.environ["LOCAL_RANK"])
    if torch.cuda.is_available():
        torch.cuda.set_device(local_rank)
    deepspeed.init_distributed(dist_backend="nccl" if torch.cuda.is_available() else "gloo")

    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")

    train_dataset = make_dataset()
    train_loader = DataLoader(train_dataset, batch_size=BATCH_SIZE, sampler=DistributedSampler(train_dataset, shuffle=True))
    model = build_model().to(device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=LR, weight_decay=0.01)

    # DeepSpeed reads its settings from ds_config.json; the values this script computes itself
    # overwrite the file's, so the two never disagree
    with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "ds_config.json")) as config_file:
        ds_config = json.load(config_file)
    ds_config["train_micro_batch_size_per_gpu"] = BATCH_SIZE
    model, optimizer, _, _ = deepspeed.initialize(model=model, optimizer=optimizer, config=ds_config)
    loss_fn = nn.CrossEntropyLoss()

    for epoch in range(EPOCHS):
        train_loader.sampler.set_epoch(epoch)
        model.train()
        epoch_loss = 0.0
        for xb, yb in train_loader:
            xb, yb = xb.to(device), yb.to(device)
            loss = loss_fn(model(xb), yb)
            model.backward(loss)
            model.step()
            epoch_loss += loss.item() * xb.size(0)
        # the epoch's figures over every rank's batches, not only this rank's share
        figures = torch.tensor([epoch_loss], dtype=torch.float64, device="cuda" if torch.cuda.is_available() else "cpu")
        dist.all_reduce(figures)
        epoch_loss = figures[0].item()

        epoch_loss /= len(train_loader.dataset)
        if dist.get_rank() == 0:
            print(f"epoch {epoch + 1:02d} | loss {epoch_loss:.4f}")

    with deepspeed.zero.GatheredParameters(list(model.module.parameters())):  # ZeRO-3 shards the weights: every rank gathers
        model_state = {name: tensor.detach().cpu().clone() for name, tensor in model.module.state_dict().items()}
    if dist.get_rank() == 0:
        torch.save(model_state, CHECKPOINT_PATH)
        print("saved to", CHECKPOINT_PATH)
    dist.barrier()  # no rank exits while rank 0 still writes its files
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
