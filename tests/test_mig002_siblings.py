"""MIG002 for a script whose backward runs in a module of its folder: only modules that run a
backward are named (a module read without one is not), and a loop of the script that calls a
method of a class such a module defines is named with that class and module."""

from __future__ import annotations

from migrate.api import migrate_source

FILES = {
    "/p/agent.py": "import torch\n\nclass Agent:\n    def learn(self, x):\n        loss = x.sum()\n        loss.backward()\n",
    "/p/tools.py": "def helper():\n    return 1\n",
}
SCRIPT = "import agent\nimport tools\n\nlearner = agent.Agent()\nfor step in range(10):\n    learner.learn(tools.helper())\n"


def _message(code: str, read=FILES.get) -> str:
    result = migrate_source(code, "ddp", path="/p/main.py", read_module=read)
    assert [f.code for f in result.findings] == ["MIG002"] and result.new == code
    return result.findings[0].message


def test_loop_calling_a_method_of_a_sibling_class() -> None:
    message = _message(SCRIPT)
    assert "`learner.learn(tools.helper())` (line 6)" in message
    assert "the class `Agent` from `agent.py`" in message and "`Agent.learn()`" in message
    assert "tools" not in message.replace("tools.helper()", "")


def test_only_modules_with_a_backward_are_named() -> None:
    message = _message(SCRIPT.replace("for step in range(10):\n    learner.learn(tools.helper())\n", "tools.helper()\n"))
    assert "`agent` (a backward in `Agent.learn()`)" in message and "`tools`" not in message


def test_unread_modules_stay_named_and_none_with_a_backward_says_so() -> None:
    assert "`agent`, `tools`" in _message(SCRIPT, read=lambda path: None)
    message = _message(SCRIPT, read=lambda path: "x = 1\n")
    assert message.startswith("not a training script") and "`agent`" not in message
