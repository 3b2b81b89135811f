"""MIG002 for a script whose backward runs in a module of its project: only modules that run a
backward are named (a module read without one is not), a call of the script into such a module (a
function, or in a loop a method of a class it defines) is named with that module, and a module with
no entry point of its own is never named as the file to convert (issue 27). A script whose step such a
module runs is read with it as one program (tests/test_project_conversion.py): its findings then
point at the module's own lines."""

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


def _refused_in(code: str, read) -> tuple[str, int, str]:  # type: ignore[no-untyped-def]
    """A script joined with its project (issue 27) and refused: (code, line, where) of its one
    finding, which stands at the script's line that imports the module and names the module's line."""
    result = migrate_source(code, "ddp", path="/p/main.py", read_module=read)
    assert result.skipped and result.new == code and not result.modules
    [found] = result.findings
    return found.code, found.line, found.message.split(": ", 1)[0]


def test_loop_calling_a_method_of_a_sibling_class_is_read_with_it() -> None:
    # the step runs in agent.py: the script and agent.py are converted as one program; a backward of
    # `x.sum()` trains no module, so it is refused, on agent.py's own line (not MIG002 on the script)
    assert _refused_in(SCRIPT, FILES.get) == ("MIG104", 1, "in agent.py (line 6)")


def test_a_function_of_a_package_module_called_by_the_script() -> None:
    files = {"/p/training/__init__.py": "",
             "/p/training/steps.py": "def learn(x):\n    loss = x.sum()\n    loss.backward()\n"}
    code = "import torch\nfrom training.steps import learn\n\nlearn(torch.ones(2))\n"
    assert _refused_in(code, files.get) == ("MIG104", 2, "in training/steps.py (line 3)")


def test_only_modules_with_a_backward_are_named() -> None:
    message = _message(SCRIPT.replace("for step in range(10):\n    learner.learn(tools.helper())\n", "tools.helper()\n"))
    assert "`agent` (a backward in `Agent.learn()`)" in message and "`tools`" not in message


def test_unread_modules_stay_named_and_none_with_a_backward_says_so() -> None:
    assert "`agent`, `tools`" in _message(SCRIPT, read=lambda path: None)
    message = _message(SCRIPT, read=lambda path: "x = 1\n")
    assert message.startswith("not a training script") and "`agent`" not in message


AGENT_WITH_DEVICE = ("import torch\n\ndevice = torch.device('cuda' if torch.cuda.is_available() else 'cpu')\n\n\n"
                     "class Agent:\n    def learn(self, x):\n        loss = x.to(device).sum()\n        loss.backward()\n")


def test_a_sibling_that_only_names_its_device_at_the_top_is_joined_as_a_library() -> None:
    assert _refused_in(SCRIPT, {**FILES, "/p/agent.py": AGENT_WITH_DEVICE}.get) == ("MIG104", 1, "in agent.py (line 9)")


def test_such_a_sibling_converted_alone_is_refused_as_a_library() -> None:
    result = migrate_source(AGENT_WITH_DEVICE, "ddp", path="/p/agent.py")
    assert [f.code for f in result.findings] == ["MIG119"] and result.new == AGENT_WITH_DEVICE
