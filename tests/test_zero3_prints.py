"""Under DeepSpeed at --zero 3 the engine's hooks sit on the user's own submodules, so any method of
the model that runs its layers (`generate`) gathers weights from every rank, also when it is called
through a moved alias (`m = model.to(device)`). A print of one must be computed on every rank."""

from __future__ import annotations

from migrate import DeepSpeedOptions, migrate_source

SCRIPT = '''\
import torch
from torch import nn


class TinyLM(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(16, 8)
        self.head = nn.Linear(8, 16)

    def forward(self, idx):
        return self.head(self.emb(idx))

    def generate(self, idx, steps):
        for _ in range(steps):
            idx = torch.cat([idx, self(idx)[:, -1].argmax(-1, keepdim=True)], dim=1)
        return idx


device = "cuda" if torch.cuda.is_available() else "cpu"
model = TinyLM()
m = model.to(device)
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
for step in range(10):
    idx = torch.randint(16, (4, 8), device=device)
    loss = nn.functional.cross_entropy(model(idx).view(-1, 16), idx.view(-1))
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
print(m.generate(torch.zeros(1, 1, dtype=torch.long, device=device), 5)[0].tolist())
'''


def converted(zero: int) -> str:
    result = migrate_source(SCRIPT, "deepspeed", DeepSpeedOptions(zero=zero), path="train.py")
    assert not result.error and result.new != SCRIPT
    return result.new


def test_a_generate_through_an_alias_is_computed_on_every_rank_at_zero_3() -> None:
    assert ("message = m.generate(torch.zeros(1, 1, dtype=torch.long, device=device), 5)[0].tolist()  "
            "# computed on every rank: it may run the model\nif dist.get_rank() == 0:\n    print(message)\n") in converted(3)


def test_below_zero_3_the_module_s_methods_gather_nothing_and_the_print_is_guarded() -> None:
    assert ("if dist.get_rank() == 0:\n    print(m.generate(torch.zeros(1, 1, dtype=torch.long, device=device), 5)"
            "[0].tolist())\n") in converted(2)
