import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, TensorDataset


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
        self.loader = loader
        self.optimizer = torch.optim.SGD(model.parameters(), lr=lr)

    def fit(self, epochs):
        for epoch in range(epochs):
            for (batch,) in self.loader:
                loss = calc_loss(self.model, batch)
                self.optimizer.zero_grad()
                loss.backward()
                self.optimizer.step()
            text = sample(self.model, batch[:1, :2]).tolist()
            print(f"epoch {epoch}: loss {loss.item():.4f} sample {text}")
        print(describe(net=self.model))


def main():
    torch.manual_seed(0)
    data = TensorDataset(torch.randint(0, 12, (256, 9)))
    loader = DataLoader(data, batch_size=16, shuffle=True)
    trainer = Trainer(TinyLM(), loader, lr=0.1)
    trainer.fit(3)
    torch.save(trainer.model.state_dict(), "tiny_lm.pt")


if __name__ == "__main__":
    main()
