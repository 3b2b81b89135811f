"""Refusals name the statement that blocks the conversion, not another one near it: an optimizer
bound again by a helper's call is named at that rebinding (Horovod's MIG402, DeepSpeed's MIG113);
a loop the environment ends (`while not done:`) around a method that runs the backward is MIG121
before any finding about the optimizer that method steps; the collision of Horovod names between
instances of a class that builds its own optimizer is said only when there is a second instance
or a copy. The scripts of tests/cases/refusal_names_rebinding and hvd_rl_method_episodes are
read here for the words; the golden cases pin the codes and the unchanged files."""

from __future__ import annotations

from pathlib import Path

from migrate.api import migrate_source
from migrate.records import Finding

CASES = Path(__file__).parent / "cases"


def _findings(code: str, target: str) -> list[Finding]:
    result = migrate_source(code, target)
    assert result.new == code, "a refused script is left unchanged"
    return list(result.findings)


def _only(findings: list[Finding], code: str) -> Finding:
    matching = [f for f in findings if f.code == code]
    assert len(matching) == 1, [f"{f.code} {f.message}" for f in findings]
    return matching[0]


def _rebinding_script() -> str:
    return (CASES / "refusal_names_rebinding" / "input.py").read_text()


def test_horovod_names_the_rebinding_and_what_converts() -> None:
    message = _only(_findings(_rebinding_script(), "horovod"), "MIG402").message
    assert "line 19 (`gen, gen_opt = restore(gen, gen_opt, args.resume)`)" in message
    assert "`restore(...)` (not defined in this file)" in message
    assert "`gen, _ = restore(gen, gen_opt, args.resume)`" in message
    assert "line 16" not in message and "torch.optim.Adam" not in message


def test_deepspeed_names_the_rebinding() -> None:
    message = _only(_findings(_rebinding_script(), "deepspeed"), "MIG113").message
    assert "which model's parameters `gen_opt` holds cannot be told here" in message
    assert "line 19 (`gen, gen_opt = restore(gen, gen_opt, args.resume)`)" in message
    assert "line 16" not in message


def test_the_advice_converts() -> None:
    """Keeping the optimizer out of the helper's targets is what the refusals advise: it converts."""
    kept = _rebinding_script().replace("gen, gen_opt = restore(", "gen, _ = restore(")
    for target in ("horovod", "deepspeed"):
        result = migrate_source(kept, target)
        assert result.new != kept and not result.skipped, [f"{f.code} {f.message}" for f in result.findings]


def test_a_helper_not_given_the_optimizer_gets_no_hand_back_advice() -> None:
    code = _rebinding_script().replace("gen, gen_opt = restore(gen, gen_opt, args.resume)",
                                       "gen, gen_opt = restore(gen, args.resume)")
    message = _only(_findings(code, "horovod"), "MIG402").message
    assert "line 19 (`gen, gen_opt = restore(gen, args.resume)`)" in message
    assert "build the optimizer in this file after line 19" in message and "hands back" not in message


def _episodes_script() -> str:
    return (CASES / "hvd_rl_method_episodes" / "input.py").read_text()


def test_episode_loop_around_a_method_is_mig121_first() -> None:
    findings = _findings(_episodes_script(), "horovod")
    assert [f.code for f in findings] == ["MIG121"]
    assert findings[0].line == 33 and "`while not done:`" in findings[0].message


def test_one_instance_states_no_collision() -> None:
    code = _episodes_script().replace("while not done:", "for _ in range(4):")
    message = _only(_findings(code, "horovod"), "MIG402").message
    assert "collide" not in message and "built over `self.parameters()`" in message


def test_second_instance_states_the_collision() -> None:
    code = _episodes_script().replace("while not done:", "for _ in range(4):")
    code = code.replace("    agent = Policy()\n", "    agent = Policy()\n    old_agent = Policy()\n")
    message = _only(_findings(code, "horovod"), "MIG402").message
    assert "`Policy` is built 2 times (lines 29, 30)" in message and "collide" in message


def test_copy_states_the_collision() -> None:
    code = _episodes_script().replace("while not done:", "for _ in range(4):").replace("import gym\n", "import copy\nimport gym\n")
    code = code.replace("    agent = Policy()\n", "    agent = Policy()\n    frozen = copy.deepcopy(agent)\n")
    message = _only(_findings(code, "horovod"), "MIG402").message
    assert "`copy.deepcopy(agent)` (line 31) copies it" in message and "collide" in message
