# `generate` is called on an untrained baseline (a bare module) and on the trained model (the
# wrapped one): inside it the custom method is reached either way.
import torch
from torch import nn
import horovod.torch as hvd


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
    hvd.init()
    local_rank = hvd.local_rank()
    if torch.cuda.is_available():
        torch.cuda.set_device(local_rank)

    model = TinyLM()
    hvd.broadcast_parameters(model.state_dict(), root_rank=0)  # every rank starts from rank 0's weights
    baseline = TinyLM()
    if hvd.rank() == 0:
        print(generate(baseline, torch.zeros(1, 1, dtype=torch.long)))
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-2 * hvd.size())
    optimizer = hvd.DistributedOptimizer(optimizer, named_parameters=model.named_parameters())
    for step in range(20):
        tokens = torch.randint(0, 16, (8, 5))
        logits = model(tokens[:, :-1])
        loss = nn.functional.cross_entropy(logits.reshape(-1, 16), tokens[:, 1:].reshape(-1))
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    if hvd.rank() == 0:
        print(generate(model, torch.zeros(1, 1, dtype=torch.long)))
    hvd.barrier()  # no rank exits while rank 0 still writes its files
    hvd.shutdown()


if __name__ == "__main__":
    main()
