"""random_split gets a seeded generator only when nothing seeds the split already."""

from __future__ import annotations

from pathlib import Path

from migrate import migrate_source

UNSEEDED = (Path(__file__).parent / "cases" / "random_split" / "input.py").read_text()


def test_a_split_after_manual_seed_is_left_as_it_is() -> None:
    seeded = UNSEEDED.replace("    dataset = TensorDataset(", "    torch.manual_seed(0)\n    dataset = TensorDataset(")
    result = migrate_source(seeded, "ddp")
    assert "random_split(dataset, [80, 20])\n" in result.new
    assert not [f for f in result.findings if "random_split" in f.message]


def test_a_split_with_its_own_generator_is_left_as_it_is() -> None:
    own = UNSEEDED.replace("[80, 20])", "[80, 20], generator=g)")
    assert "[80, 20], generator=g)\n" in migrate_source(own, "ddp").new
