import os
import torch
import torch.nn as nn
import torch.distributed as dist
from torch.distributed.fsdp import fully_shard, register_fsdp_forward_method
from torch.distributed.device_mesh import init_device_mesh
from torch.utils.data.distributed import DistributedSampler


class TinyLM(nn.Module):
    def __init__(self, vocab=32, width=16):
        super().__init__()
        self.embed = nn.Embedding(vocab, width)
        self.layers = nn.ModuleList([nn.Linear(width, width) for _ in range(2)])
        self.head = nn.Linear(width, vocab)
        self.init_weights()

    def init_weights(self):
        nn.init.normal_(self.embed.weight, std=0.02)

    def configure_optimizers(self, lr):
        decay = [p for n, p in self.named_parameters() if n.endswith("weight")]
        rest = [p for n, p in self.named_parameters() if not n.endswith("weight")]
        return torch.optim.AdamW([{"params": decay, "weight_decay": 0.1}, {"params": rest}], lr=lr)

    def forward(self, idx):
        x = self.embed(idx)
        for layer in self.layers:
            x = torch.relu(layer(x))
        return self.head(x)

    @torch.no_grad()
    def generate(self, idx, steps):
        for _ in range(steps):
            logits = self(idx)[:, -1]
            idx = torch.cat([idx, logits.argmax(-1, keepdim=True)], dim=1)
        return idx


def main():
    # torchrun sets these; plain `python train.py` runs as a single process (port 0: any free one)
    for key, value in dict(RANK="0", LOCAL_RANK="0", WORLD_SIZE="1", MASTER_ADDR="127.0.0.1", MASTER_PORT="0").items():
        os.environ.setdefault(key, value)
    local_rank = int(os.environ["LOCAL_RANK"])
    if torch.cuda.is_available():
        torch.cuda.set_device(local_rank)
    dist.init_process_group("cpu:gloo,cuda:nccl" if torch.cuda.is_available() else "gloo")

    torch.manual_seed(0)
    model = TinyLM()
    # sharded on the device the script keeps the model on (FSDP2's default is the GPU, when there is one)
    device_mesh = init_device_mesh(next(model.parameters()).device.type, (dist.get_world_size(),))
    for submodule in model.modules():  # each block's weights are gathered only while it runs
        if isinstance(submodule, torch.nn.Linear):
            fully_shard(submodule, mesh=device_mesh)
    fully_shard(model, mesh=device_mesh)
    register_fsdp_forward_method(model, "generate")  # gathers the weights around it, as around forward()
    optimizer = model.configure_optimizers(1e-2)
    data = torch.randint(0, 32, (64, 9))
    loader = torch.utils.data.DataLoader(data, batch_size=8, sampler=DistributedSampler(data, shuffle=False))
    for batch in loader:
        logits = model(batch[:, :-1])
        loss = nn.functional.cross_entropy(logits.reshape(-1, 32), batch[:, 1:].reshape(-1))
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    message = model.generate(torch.zeros(1, 1, dtype=torch.long), 4)  # computed on every rank: it may run the model
    if dist.get_rank() == 0:
        print(message)
    dist.barrier()  # no rank exits while rank 0 still writes its files
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
