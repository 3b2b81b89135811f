"""Language-model pretraining on a token stream that is too large to index."""
import torch
import torch.nn as nn
from torch.utils.data import DataLoader, IterableDataset
import horovod.torch as hvd

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
    hvd.init()
    local_rank = hvd.local_rank()
    if torch.cuda.is_available():
        torch.cuda.set_device(local_rank)

    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    stream = TokenStream(num_blocks=10_000)
    loader = DataLoader(stream, batch_size=16)
    model = nn.Sequential(nn.Embedding(VOCAB, 64), nn.Linear(64, VOCAB)).to(device)
    hvd.broadcast_parameters(model.state_dict(), root_rank=0)  # every rank starts from rank 0's weights
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    optimizer = hvd.DistributedOptimizer(optimizer, named_parameters=model.named_parameters())
    for step, (inputs, targets) in enumerate(loader):
        inputs, targets = inputs.to(device), targets.to(device)
        logits = model(inputs)
        loss = nn.functional.cross_entropy(logits.view(-1, VOCAB), targets.view(-1))
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        if step % 100 == 0 and hvd.rank() == 0:
            print(f"step {step} loss {loss.item():.3f}")
    if hvd.rank() == 0:
        torch.save(model.state_dict(), "lm.pt")
    hvd.barrier()  # no rank exits while rank 0 still writes its files
    hvd.shutdown()


if __name__ == "__main__":
    main()
