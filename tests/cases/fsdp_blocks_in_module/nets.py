"""A small decoder kept in its own module, as larger projects do: the training script imports it."""
import torch
import torch.nn as nn


class DecoderLayer(nn.Module):
    def __init__(self, width: int, heads: int) -> None:
        super().__init__()
        self.attention = nn.MultiheadAttention(width, heads, batch_first=True)
        self.norm = nn.LayerNorm(width)
        self.feed_forward = nn.Sequential(nn.Linear(width, 4 * width), nn.GELU(), nn.Linear(4 * width, width))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        attended, _ = self.attention(x, x, x, need_weights=False)
        x = self.norm(x + attended)
        return x + self.feed_forward(x)


class Decoder(nn.Module):
    def __init__(self, vocabulary: int, width: int = 64, depth: int = 4, heads: int = 4) -> None:
        super().__init__()
        self.embed = nn.Embedding(vocabulary, width)
        self.layers = nn.ModuleList()
        for _ in range(depth):
            self.layers.append(DecoderLayer(width, heads))
        self.out = nn.Linear(width, vocabulary)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        x = self.embed(tokens)
        for layer in self.layers:
            x = layer(x)
        return self.out(x)

    @torch.no_grad()
    def complete(self, tokens: torch.Tensor, steps: int) -> torch.Tensor:
        for _ in range(steps):
            next_token = self(tokens)[:, -1].argmax(-1, keepdim=True)
            tokens = torch.cat([tokens, next_token], dim=1)
        return tokens
