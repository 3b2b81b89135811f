"""A character RNN trained at module level by a function defined above the model, which reads the
model's own attribute (vocab) and saves the whole module."""
import os
import torch
import torch.nn as nn
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP

# torchrun sets these; plain `python train.py` runs as a single process (port 0: any free one)
for key, value in dict(RANK="0", LOCAL_RANK="0", WORLD_SIZE="1", MASTER_ADDR="127.0.0.1", MASTER_PORT="0").items():
    os.environ.setdefault(key, value)
local_rank = int(os.environ["LOCAL_RANK"])
if torch.cuda.is_available():
    torch.cuda.set_device(local_rank)
dist.init_process_group("cpu:gloo,cuda:nccl" if torch.cuda.is_available() else "gloo")

device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
text = torch.randint(0, 20, (4096,))


class CharRNN(nn.Module):
    def __init__(self, vocab=20, hidden=64):
        super().__init__()
        self.vocab = vocab
        self.embed = nn.Embedding(vocab, hidden)
        self.rnn = nn.GRU(hidden, hidden, batch_first=True)
        self.out = nn.Linear(hidden, vocab)

    def forward(self, x):
        y, _ = self.rnn(self.embed(x))
        return self.out(y)


def train_step(inputs, targets):
    output = decoder(inputs)
    loss = criterion(output.reshape(-1, decoder.module.vocab), targets.reshape(-1))
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    return loss.item()


def save():
    if dist.get_rank() == 0:
        torch.save(decoder.module, "char_rnn.pt")


decoder = CharRNN().to(device)
decoder = DDP(decoder)
optimizer = torch.optim.Adam(decoder.parameters(), lr=1e-3)
criterion = nn.CrossEntropyLoss()
for step in range(100):
    start = torch.randint(0, len(text) - 33, (8,))
    chunk = torch.stack([text[s:s + 33] for s in start]).to(device)
    loss = train_step(chunk[:, :-1], chunk[:, 1:])
    if step % 25 == 0 and dist.get_rank() == 0:
        print(f"step {step} loss {loss:.3f}")
save()
dist.barrier()  # no rank exits while rank 0 still writes its files
dist.destroy_process_group()
