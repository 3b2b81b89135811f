import argparse
import json
import os

import torch
import torch.nn as nn
import deepspeed
import torch.distributed as dist

parser = argparse.ArgumentParser()
parser.add_argument("--epochs", type=int, default=50)
parser.add_argument("--batch-size", type=int, default=128)
parser.add_argument("--lr", type=float, default=1e-2)
parser.add_argument("--local_rank", "--local-rank", type=int, default=-1, help="set by the deepspeed launcher")
args = parser.parse_args()

# the deepspeed launcher sets these; plain `python train.py` runs as a single process (port 0: any free one)
for key, value in dict(RANK="0", LOCAL_RANK="0", WORLD_SIZE="1", MASTER_ADDR="127.0.0.1", MASTER_PORT="0").items():
    os.environ.setdefault(key, value)
local_rank = int(os.environ["LOCAL_RANK"])
if torch.cuda.is_available():
    torch.cuda.set_device(local_rank)
deepspeed.init_distributed(dist_backend="nccl" if torch.cuda.is_available() else "gloo")

device = torch.device("cuda" if torch.cuda.is_available() else "cpu")

# everything fits in memory, so skip the DataLoader entirely
n = 20000
x_train = torch.randn(n, 10)
true_w = torch.randn(10, 1)
y_train = x_train @ true_w + 0.1 * torch.randn(n, 1)
x_train, y_train = x_train.to(device), y_train.to(device)

model = nn.Linear(10, 1).to(device)
optimizer = torch.optim.SGD(model.parameters(), lr=args.lr)

# DeepSpeed reads its settings from ds_config.json
with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "ds_config.json")) as config_file:
    ds_config = json.load(config_file)
model, optimizer, _, _ = deepspeed.initialize(model=model, optimizer=optimizer, config=ds_config)
loss_fn = nn.MSELoss()

for epoch in range(args.epochs):
    perm = torch.randperm(n, device=device)
    epoch_loss = 0.0
    for i in range(0, n, args.batch_size):
        idx = perm[i:i + args.batch_size]
        xb, yb = x_train[idx], y_train[idx]

        loss = loss_fn(model(xb), yb)
        model.backward(loss)
        model.step()
        epoch_loss += loss.item() * xb.size(0)

    if epoch % 5 == 0 and dist.get_rank() == 0:
        print(f"epoch {epoch}: mse {epoch_loss / n:.6f}")

if dist.get_rank() == 0:
    print("learned weights error:", (model.module.weight.detach().cpu().T - true_w).abs().max().item())
with deepspeed.zero.GatheredParameters(list(model.module.parameters())):  # ZeRO-3 shards the weights: every rank gathers
    model_state = {name: tensor.detach().cpu().clone() for name, tensor in model.module.state_dict().items()}
if dist.get_rank() == 0:
    torch.save(model_state, "linreg.pt")
dist.barrier()  # no rank exits while rank 0 still writes its files
dist.destroy_process_group()
