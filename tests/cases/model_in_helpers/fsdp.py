import os
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, TensorDataset
import torch.distributed as dist
from torch.distributed.fsdp import fully_shard, register_fsdp_forward_method
from torch.distributed.device_mesh import init_device_mesh
from torch.utils.data.distributed import DistributedSampler
from torch.distributed.checkpoint.state_dict import get_model_state_dict, StateDictOptions


class TinyLM(nn.Module):
    def __init__(self, vocab=12, dim=16, block_size=8):
        super().__init__()
        self.block_size = block_size
        self.emb = nn.Embedding(vocab, dim)
        self.head = nn.Linear(dim, vocab)

    def forward(self, idx):
        return self.head(self.emb(idx))

    @torch.no_grad()
    def generate(self, idx, steps):
        for _ in range(steps):
            logits = self(idx[:, -self.block_size :])
            idx = torch.cat([idx, logits[:, -1].argmax(-1, keepdim=True)], dim=1)
        return idx


def calc_loss(model, batch):
    logits = model(batch[:, :-1])
    return F.cross_entropy(logits.flatten(0, 1), batch[:, 1:].flatten())


def sample(model, prompt, steps=4):
    model.eval()
    out = model.generate(prompt, steps)
    model.train()
    return out


def describe(net):
    return f"{net.block_size}-token context, {sum(p.numel() for p in net.parameters())} weights"


class Trainer:
    def __init__(self, model, loader, lr):
        self.model = model
        # sharded on the device the script keeps the model on (FSDP2's default is the GPU, when there is one)
        device_mesh = init_device_mesh(next(self.model.parameters()).device.type, (dist.get_world_size(),))
        fully_shard(self.model, mesh=device_mesh)
        register_fsdp_forward_method(self.model, "generate")  # gathers the weights around it, as around forward()
        self.loader = loader
        self.optimizer = torch.optim.SGD(model.parameters(), lr=lr)

    def fit(self, epochs):
        for epoch in range(epochs):
            self.loader.sampler.set_epoch(epoch)
            for (batch,) in self.loader:
                loss = calc_loss(self.model, batch)
                self.optimizer.zero_grad()
                loss.backward()
                self.optimizer.step()
            text = sample(self.model, batch[:1, :2]).tolist()
            if dist.get_rank() == 0:
                print(f"epoch {epoch}: loss {loss.item():.4f} sample {text}")
        message = describe(net=self.model)  # computed on every rank: it may run the model
        if dist.get_rank() == 0:
            print(message)


def main():
    # torchrun sets these; plain `python train.py` runs as a single process (port 0: any free one)
    for key, value in dict(RANK="0", LOCAL_RANK="0", WORLD_SIZE="1", MASTER_ADDR="127.0.0.1", MASTER_PORT="0").items():
        os.environ.setdefault(key, value)
    local_rank = int(os.environ["LOCAL_RANK"])
    if torch.cuda.is_available():
        torch.cuda.set_device(local_rank)
    dist.init_process_group("cpu:gloo,cuda:nccl" if torch.cuda.is_available() else "gloo")

    torch.manual_seed(0)
    data = TensorDataset(torch.randint(0, 12, (256, 9)))
    loader = DataLoader(data, batch_size=16, sampler=DistributedSampler(data, shuffle=True))
    trainer = Trainer(TinyLM(), loader, lr=0.1)
    trainer.fit(3)
    model_state = get_model_state_dict(trainer.model, options=StateDictOptions(full_state_dict=True, cpu_offload=True))  # every rank gathers; rank 0 gets the full weights
    if dist.get_rank() == 0:
        torch.save(model_state, "tiny_lm.pt")
    dist.barrier()  # no rank exits while rank 0 still writes its files
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
