import torch
import torch.nn as nn


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
    torch.manual_seed(0)
    model = TinyLM()
    optimizer = model.configure_optimizers(1e-2)
    data = torch.randint(0, 32, (64, 9))
    loader = torch.utils.data.DataLoader(data, batch_size=8)
    for batch in loader:
        logits = model(batch[:, :-1])
        loss = nn.functional.cross_entropy(logits.reshape(-1, 32), batch[:, 1:].reshape(-1))
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    print(model.generate(torch.zeros(1, 1, dtype=torch.long), 4))


if __name__ == "__main__":
    main()
