import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, TensorDataset
import horovod.torch as hvd
from torch.utils.data.distributed import DistributedSampler


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
        hvd.broadcast_parameters(self.model.state_dict(), root_rank=0)  # every rank starts from rank 0's weights
        self.loader = loader
        self.optimizer = torch.optim.SGD(model.parameters(), lr=lr * hvd.size())
        self.optimizer = hvd.DistributedOptimizer(self.optimizer, named_parameters=model.named_parameters())

    def fit(self, epochs):
        for epoch in range(epochs):
            self.loader.sampler.set_epoch(epoch)
            for (batch,) in self.loader:
                loss = calc_loss(self.model, batch)
                self.optimizer.zero_grad()
                loss.backward()
                self.optimizer.step()
            text = sample(self.model, batch[:1, :2]).tolist()
            if hvd.rank() == 0:
                print(f"epoch {epoch}: loss {loss.item():.4f} sample {text}")
        if hvd.rank() == 0:
            print(describe(net=self.model))


def main():
    hvd.init()
    local_rank = hvd.local_rank()
    if torch.cuda.is_available():
        torch.cuda.set_device(local_rank)

    torch.manual_seed(0)
    data = TensorDataset(torch.randint(0, 12, (256, 9)))
    loader = DataLoader(data, batch_size=16, sampler=DistributedSampler(data, num_replicas=hvd.size(), rank=hvd.rank(), shuffle=True))
    trainer = Trainer(TinyLM(), loader, lr=0.1)
    trainer.fit(3)
    if hvd.rank() == 0:
        torch.save(trainer.model.state_dict(), "tiny_lm.pt")
    hvd.barrier()  # no rank exits while rank 0 still writes its files
    hvd.shutdown()


if __name__ == "__main__":
    main()
