"""Train a tiny decoder-only transformer as a character-level language model.

The corpus is a fixed 48-character "phrase" (drawn once from a seeded generator)
repeated over and over; the model learns to continue it.
"""
import argparse
import string

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, Dataset

CHARS = string.ascii_lowercase + " .,;!?"  # 32 symbols
VOCAB_SIZE = len(CHARS)
STOI = {ch: i for i, ch in enumerate(CHARS)}


def encode(text):
    return torch.tensor([STOI[ch] for ch in text], dtype=torch.long)


def decode(tokens):
    return "".join(CHARS[t] for t in tokens)


def build_corpus(num_chars, period=48, data_seed=5):
    g = torch.Generator().manual_seed(data_seed)
    phrase = decode(torch.randint(0, VOCAB_SIZE, (period,), generator=g).tolist())
    return (phrase * (num_chars // period + 1))[:num_chars]


class CharWindows(Dataset):
    """All (x, y) windows of length `block_size`, y shifted by one character."""

    def __init__(self, tokens, block_size, num_windows):
        assert len(tokens) >= num_windows + block_size
        self.tokens = tokens
        self.block_size = block_size
        self.num_windows = num_windows

    def __len__(self):
        return self.num_windows

    def __getitem__(self, i):
        chunk = self.tokens[i:i + self.block_size + 1]
        return chunk[:-1], chunk[1:]


class Block(nn.Module):
    def __init__(self, d_model, n_head, dropout):
        super().__init__()
        self.ln1 = nn.LayerNorm(d_model)
        # no projection biases: the key bias gets no gradient (softmax ignores a constant shift),
        # so it would only drift on rounding noise amplified by AdamW
        self.attn = nn.MultiheadAttention(d_model, n_head, dropout=dropout, bias=False, batch_first=True)
        self.ln2 = nn.LayerNorm(d_model)
        self.mlp = nn.Sequential(
            nn.Linear(d_model, 4 * d_model),
            nn.GELU(),
            nn.Linear(4 * d_model, d_model),
            nn.Dropout(dropout),
        )

    def forward(self, x, attn_mask):
        h = self.ln1(x)
        x = x + self.attn(h, h, h, attn_mask=attn_mask, need_weights=False)[0]
        x = x + self.mlp(self.ln2(x))
        return x


class CharTransformer(nn.Module):
    def __init__(self, vocab_size, block_size, d_model=32, n_layer=2, n_head=4, dropout=0.0):
        super().__init__()
        self.block_size = block_size
        self.tok_emb = nn.Embedding(vocab_size, d_model)
        self.pos_emb = nn.Embedding(block_size, d_model)
        self.drop = nn.Dropout(dropout)
        self.blocks = nn.ModuleList([Block(d_model, n_head, dropout) for _ in range(n_layer)])
        self.ln_f = nn.LayerNorm(d_model)
        self.head = nn.Linear(d_model, vocab_size)
        mask = torch.triu(torch.ones(block_size, block_size, dtype=torch.bool), diagonal=1)
        self.register_buffer("causal_mask", mask, persistent=False)

    def forward(self, idx):
        T = idx.size(1)
        pos = torch.arange(T, device=idx.device)
        x = self.drop(self.tok_emb(idx) + self.pos_emb(pos))
        mask = self.causal_mask[:T, :T]
        for block in self.blocks:
            x = block(x, mask)
        return self.head(self.ln_f(x))

    @torch.no_grad()
    def generate(self, idx, max_new_tokens):
        """Greedily extend `idx` (B, T) by `max_new_tokens` tokens."""
        for _ in range(max_new_tokens):
            logits = self(idx[:, -self.block_size:])
            next_token = logits[:, -1].argmax(dim=-1, keepdim=True)
            idx = torch.cat([idx, next_token], dim=1)
        return idx


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description="Tiny character-level transformer")
    parser.add_argument("--epochs", type=int, default=5)
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--lr", type=float, default=3e-3)
    parser.add_argument("--weight-decay", type=float, default=0.1)
    parser.add_argument("--dropout", type=float, default=0.0)
    parser.add_argument("--block-size", type=int, default=16)
    parser.add_argument("--compile", action="store_true", help="wrap the model with torch.compile")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--save", type=str, default=None, help="write the final state_dict here")
    parser.add_argument("--no-shuffle", action="store_true")
    args = parser.parse_args()

    device = "cuda" if torch.cuda.is_available() else "cpu"

    num_windows = 256
    text = build_corpus(num_windows + args.block_size + 1)
    data = encode(text)
    train_set = CharWindows(data, args.block_size, num_windows)
    train_loader = DataLoader(train_set, batch_size=args.batch_size, shuffle=not args.no_shuffle)
    print(f"corpus: {len(text)} chars, vocab {VOCAB_SIZE}, {len(train_set)} windows")

    torch.manual_seed(args.seed)
    model = CharTransformer(VOCAB_SIZE, args.block_size, dropout=args.dropout).to(device)
    print(f"parameters: {sum(p.numel() for p in model.parameters()):,}")
    if args.compile:
        model = torch.compile(model)

    decay = [p for n, p in model.named_parameters() if p.dim() >= 2]
    no_decay = [p for n, p in model.named_parameters() if p.dim() < 2]
    optimizer = torch.optim.AdamW(
        [
            {"params": decay, "weight_decay": args.weight_decay},
            {"params": no_decay, "weight_decay": 0.0},
        ],
        lr=args.lr,
        betas=(0.9, 0.95),
    )

    for epoch in range(1, args.epochs + 1):
        model.train()
        losses = []
        for x, y in train_loader:
            x, y = x.to(device), y.to(device)
            logits = model(x)
            loss = F.cross_entropy(logits.view(-1, logits.size(-1)), y.view(-1))
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            optimizer.step()
            losses.append(loss.item())
        print(f"epoch {epoch} train_loss {sum(losses) / len(losses):.4f}")

    model.eval()
    prompt = data[: args.block_size].unsqueeze(0).to(device)
    sample = model.generate(prompt, max_new_tokens=48)
    print(f"prompt: {decode(prompt[0].tolist())!r}")
    print(f"sample: {decode(sample[0, args.block_size:].tolist())!r}")
    print(f"truth : {text[args.block_size:args.block_size + 48]!r}")

    if args.save:
        torch.save(model.state_dict(), args.save)
        print(f"saved model to {args.save}")
