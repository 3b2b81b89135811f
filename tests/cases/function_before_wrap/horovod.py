"""A character RNN trained at module level by a function defined above the model, which reads the
model's own attribute (vocab) and saves the whole module."""
import torch
import torch.nn as nn
import horovod.torch as hvd

hvd.init()
local_rank = hvd.local_rank()
if torch.cuda.is_available():
    torch.cuda.set_device(local_rank)

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
    loss = criterion(output.reshape(-1, decoder.vocab), targets.reshape(-1))
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    return loss.item()


def save():
    if hvd.rank() == 0:
        torch.save(decoder, "char_rnn.pt")


decoder = CharRNN().to(device)
hvd.broadcast_parameters(decoder.state_dict(), root_rank=0)  # every rank starts from rank 0's weights
optimizer = torch.optim.Adam(decoder.parameters(), lr=1e-3 * hvd.size())
optimizer = hvd.DistributedOptimizer(optimizer, named_parameters=decoder.named_parameters())
criterion = nn.CrossEntropyLoss()
for step in range(100):
    start = torch.randint(0, len(text) - 33, (8,))
    chunk = torch.stack([text[s:s + 33] for s in start]).to(device)
    loss = train_step(chunk[:, :-1], chunk[:, 1:])
    if step % 25 == 0 and hvd.rank() == 0:
        print(f"step {step} loss {loss:.3f}")
save()
hvd.barrier()  # no rank exits while rank 0 still writes its files
hvd.shutdown()
