# `generate` is called on an untrained baseline (a bare module) and on the trained model (the
# wrapped one): inside it the custom method is reached either way.
import os
import torch
from torch import nn
import torch.distributed as dist
from torch.distributed.fsdp import fully_shard, register_fsdp_forward_method
from torch.distributed.device_mesh import init_device_mesh


class TinyLM(nn.Module):
    def __init__(self, vocab=16, width=8):
        super().__init__()
        self.embed = nn.Embedding(vocab, width)
        self.head = nn.Linear(width, vocab)

    def forward(self, tokens):
        return self.head(self.embed(tokens))

    def next_token(self, tokens):
        return self.forward(tokens)[:, -1].argmax(-1, keepdim=True)


def generate(model, tokens, steps=3):
    with torch.no_grad():
        for _ in range(steps):
            tokens = torch.cat([tokens, model.next_token(tokens)], dim=1)
    return tokens


def main():
    # torchrun sets these; plain `python train.py` runs as a single process (port 0: any free one)
    for key, value in dict(RANK="0", LOCAL_RANK="0", WORLD_SIZE="1", MASTER_ADDR="127.0.0.1", MASTER_PORT="0").items():
        os.environ.setdefault(key, value)
    local_rank = int(os.environ["LOCAL_RANK"])
    if torch.cuda.is_available():
        torch.cuda.set_device(local_rank)
    dist.init_process_group("cpu:gloo,cuda:nccl" if torch.cuda.is_available() else "gloo")

    model = TinyLM()
    # sharded on the device the script keeps the model on (FSDP2's default is the GPU, when there is one)
    device_mesh = init_device_mesh(next(model.parameters()).device.type, (dist.get_world_size(),))
    fully_shard(model, mesh=device_mesh)
    register_fsdp_forward_method(model, "next_token")  # gathers the weights around it, as around forward()
    baseline = TinyLM()
    message = generate(baseline, torch.zeros(1, 1, dtype=torch.long))  # computed on every rank: it may run the model
    if dist.get_rank() == 0:
        print(message)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
    for step in range(20):
        tokens = torch.randint(0, 16, (8, 5))
        logits = model(tokens[:, :-1])
        loss = nn.functional.cross_entropy(logits.reshape(-1, 16), tokens[:, 1:].reshape(-1))
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    message = generate(model, torch.zeros(1, 1, dtype=torch.long))  # computed on every rank: it may run the model
    if dist.get_rank() == 0:
        print(message)
    dist.barrier()  # no rank exits while rank 0 still writes its files
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
