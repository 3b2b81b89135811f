"""A language model whose forward returns the loss too, evaluated by a helper that reads it."""
import torch
import torch.nn as nn
import torch.nn.functional as F
import horovod.torch as hvd

hvd.init()
local_rank = hvd.local_rank()
if torch.cuda.is_available():
    torch.cuda.set_device(local_rank)

use_gpu = torch.cuda.is_available()
device = torch.device("cuda" if use_gpu else "cpu")
VOCAB, BLOCK, BATCH = 32, 8, 16
data = torch.randint(0, VOCAB, (2048,))


def batch():
    starts = torch.randint(0, len(data) - BLOCK - 1, (BATCH,))
    x = torch.stack([data[s:s + BLOCK] for s in starts])
    y = torch.stack([data[s + 1:s + BLOCK + 1] for s in starts])
    return x.to(device), y.to(device)


class TinyLM(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(VOCAB, 64)
        self.head = nn.Linear(64, VOCAB)

    def forward(self, idx, targets=None):
        logits = self.head(self.embed(idx))
        loss = None if targets is None else F.cross_entropy(logits.view(-1, VOCAB), targets.view(-1))
        return logits, loss


@torch.no_grad()
def estimate_loss(model):
    model.eval()
    x, y = batch()
    _, loss = model(x, y)
    model.train()
    return loss.item()


model = TinyLM().to(device)
hvd.broadcast_parameters(model.state_dict(), root_rank=0)  # every rank starts from rank 0's weights
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3 * hvd.size())
optimizer = hvd.DistributedOptimizer(optimizer, named_parameters=model.named_parameters())
for step in range(200):
    x, y = batch()
    logits, loss = model(x, y)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    if step % 50 == 0 and hvd.rank() == 0:
        print(f"step {step}: train {loss.item():.3f} eval {estimate_loss(model):.3f}")
if hvd.rank() == 0:
    torch.save(model.state_dict(), "tiny_lm.pt")
hvd.barrier()  # no rank exits while rank 0 still writes its files
hvd.shutdown()
