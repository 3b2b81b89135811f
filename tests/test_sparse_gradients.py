"""A model that makes sparse gradients (`nn.EmbeddingBag(..., sparse=True)`), in the script or in
the model's class in a module of its project: NCCL cannot all-reduce them ("NCCL does not support
all_reduce with sparse tensors" at the first backward on a GPU host), so DDP starts its process
group with gloo there too, and MIG136 names the layer. Conversion only."""

from __future__ import annotations

from pathlib import Path

from migrate import migrate_source
from migrate.api import migrate_file
from migrate.records import FileResult

MODEL = """\
import torch.nn as nn


class Bag(nn.Module):
    def __init__(self, vocab, dim, classes):
        super().__init__()
        self.embedding = nn.EmbeddingBag(vocab, dim, sparse=True)
        self.fc = nn.Linear(dim, classes)

    def forward(self, text, offsets):
        return self.fc(self.embedding(text, offsets))
"""

TRAIN = """\
import torch
import torch.nn as nn

from model import Bag


def main():
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    model = Bag(100, 8, 2).to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    data = torch.utils.data.TensorDataset(torch.randint(0, 100, (32, 5)), torch.randint(0, 2, (32,)))
    loader = torch.utils.data.DataLoader(data, batch_size=4)
    for epoch in range(2):
        for text, label in loader:
            optimizer.zero_grad()
            offsets = torch.arange(0, text.numel(), 5)
            nn.functional.cross_entropy(model(text.flatten(), offsets), label).backward()
            optimizer.step()


if __name__ == "__main__":
    main()
"""

GLOO = "    dist.init_process_group(\"gloo\")  # the model's sparse gradients: NCCL cannot all-reduce them\n"


def test_a_sparse_embedding_in_the_model_s_module_starts_gloo_on_every_host(tmp_path: Path) -> None:
    (tmp_path / "model.py").write_text(MODEL)
    (tmp_path / "train.py").write_text(TRAIN)
    result = migrate_file(str(tmp_path / "train.py"), "ddp")
    assert isinstance(result, FileResult)
    assert GLOO in result.new and "nccl" not in result.new
    [note] = [f for f in result.findings if f.code == "MIG136"]
    assert note.message.startswith("`nn.EmbeddingBag(vocab, dim, sparse=True)` (in `Bag` of model.py) makes sparse gradients")


def test_one_in_the_script_itself_too_and_a_dense_one_keeps_nccl() -> None:
    script = MODEL + "\n\n" + TRAIN.replace("from model import Bag\n", "")
    assert GLOO in migrate_source(script, "ddp", path="train.py").new
    dense = migrate_source(script.replace(", sparse=True", ""), "ddp", path="train.py")
    assert '"cpu:gloo,cuda:nccl"' in dense.new and not [f for f in dense.findings if f.code == "MIG136"]
