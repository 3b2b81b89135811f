"""Language-model pretraining on a token stream that is too large to index."""
import json
import os
import torch
import torch.nn as nn
from torch.utils.data import DataLoader, IterableDataset
import deepspeed
import torch.distributed as dist

BLOCK = 32
VOCAB = 256


class TokenStream(IterableDataset):
    def __init__(self, num_blocks):
        self.num_blocks = num_blocks

    def __iter__(self):
        generator = torch.Generator().manual_seed(0)
        for _ in range(self.num_blocks):
            tokens = torch.randint(0, VOCAB, (BLOCK + 1,), generator=generator)
            yield tokens[:-1], tokens[1:]


def main():
    # the deepspeed launcher sets these; plain `python train.py` runs as a single process (port 0: any free one)
    for key, value in dict(RANK="0", LOCAL_RANK="0", WORLD_SIZE="1", MASTER_ADDR="127.0.0.1", MASTER_PORT="0").items():
        os.environ.setdefault(key, value)
    local_rank = int(os.environ["LOCAL_RANK"])
    if torch.cuda.is_available():
        torch.cuda.set_device(local_rank)
    deepspeed.init_distributed(dist_backend="nccl" if torch.cuda.is_available() else "gloo")

    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    stream = TokenStream(num_blocks=10_000)
    loader = DataLoader(stream, batch_size=16)
    model = nn.Sequential(nn.Embedding(VOCAB, 64), nn.Linear(64, VOCAB)).to(device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)

    # DeepSpeed reads its settings from ds_config.json
    with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "ds_config.json")) as config_file:
        ds_config = json.load(config_file)
    model, optimizer, _, _ = deepspeed.initialize(model=model, optimizer=optimizer, config=ds_config)
    for step, (inputs, targets) in enumerate(loader):
        inputs, targets = inputs.to(device), targets.to(device)
        logits = model(inputs)
        loss = nn.functional.cross_entropy(logits.view(-1, VOCAB), targets.view(-1))
        model.backward(loss)
        model.step()
        if step % 100 == 0 and dist.get_rank() == 0:
            print(f"step {step} loss {loss.item():.3f}")
    with deepspeed.zero.GatheredParameters(list(model.module.parameters())):  # ZeRO-3 shards the weights: every rank gathers
        model_state = {name: tensor.detach().cpu().clone() for name, tensor in model.module.state_dict().items()}
    if dist.get_rank() == 0:
        torch.save(model_state, "lm.pt")
    dist.barrier()  # no rank exits while rank 0 still writes its files
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
