"""MIG002 for a script whose backward runs in a module of its project: only modules that run a
backward are named (a module read without one is not), a call of the script into such a module (a
function, or in a loop a method of a class it defines) is named with that module, and a module with
no entry point of its own is never named as the file to convert (issue 27)."""

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
    assert "`agent.py` has no entry point of its own, so converting it alone is refused too" in message
    assert "convert that file" not in message and "issue 27" in message


def test_a_function_of_a_package_module_called_by_the_script() -> None:
    files = {"/p/training/__init__.py": "",
             "/p/training/steps.py": "def learn(x):\n    loss = x.sum()\n    loss.backward()\n"}
    code = "import torch\nfrom training.steps import learn\n\nlearn(torch.ones(2))\n"
    message = _message(code, read=files.get)
    assert "it calls `learn(torch.ones(2))` (line 4), and the backward runs in `learn()` of `training/steps.py`" in message
    assert "`training/steps.py` has no entry point of its own" in message


def test_only_modules_with_a_backward_are_named() -> None:
    message = _message(SCRIPT.replace("for step in range(10):\n    learner.learn(tools.helper())\n", "tools.helper()\n"))
    assert "`agent` (a backward in `Agent.learn()`)" in message and "`tools`" not in message


def test_unread_modules_stay_named_and_none_with_a_backward_says_so() -> None:
    assert "`agent`, `tools`" in _message(SCRIPT, read=lambda path: None)
    message = _message(SCRIPT, read=lambda path: "x = 1\n")
    assert message.startswith("not a training script") and "`agent`" not in message


AGENT_WITH_DEVICE = ("import torch\n\ndevice = torch.device('cuda' if torch.cuda.is_available() else 'cpu')\n\n\n"
                     "class Agent:\n    def learn(self, x):\n        loss = x.to(device).sum()\n        loss.backward()\n")


def test_a_sibling_that_only_names_its_device_at_the_top_has_no_entry_point() -> None:
    message = _message(SCRIPT, read={**FILES, "/p/agent.py": AGENT_WITH_DEVICE}.get)
    assert "`agent.py` has no entry point of its own" in message
    assert "which has an entry point of its own" not in message


def test_such_a_sibling_converted_alone_is_refused_as_a_library() -> None:
    result = migrate_source(AGENT_WITH_DEVICE, "ddp", path="/p/agent.py")
    assert [f.code for f in result.findings] == ["MIG119"] and result.new == AGENT_WITH_DEVICE
