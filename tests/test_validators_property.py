"""Every option of `migrate launch` and `migrate to-<target>` that takes a string, and the script's
arguments after `--`, fed values holding each character that means something to a shell, YAML or a
remote command line (control characters, quotes, `$`, globs, `#`, non-ASCII, a line separator, a
byte that is not UTF-8) appended, prepended and embedded, and a leading `-`. Each value is either
refused (exit 2, the message names the option) or reaches what reads it exactly as given: every
launcher written passes `bash -n`, and run with stand-ins for torchrun, deepspeed, horovodrun and
srun that record their argv, hands the stand-in the very string; a manifest or DeepSpeed config
parses to it; a converted script compiles and holds it. Running a launcher creates no file.

hypothesis is not installed in .venv, so the cases are an enumerated table: every character in
every position, for every option. The command runs in this process (typer's CliRunner), which
also carries the values no real command line can (a NUL). Options read as numbers are included:
only whitespace around the number is accepted (as the number). `--exclude` is left out: its globs
only match paths inside this process, and never reach a file or a command line.
"""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest
import typer
import yaml
from typer.testing import CliRunner

from migrate.cli import app
from migrate.sources import printable

CHARACTERS = ["\n", "\r", "\t", "\0", " ", "'", '"', "`", "$", ";", "&", "|", "<", ">", "(", ")", "\\", "*", "?",
              "[", "]", "{", "}", "~", "#", "!", "é", "\u2028", "\udcff"]  # \udcff: the byte 0xff in a name
SCRIPT = """import torch

model = torch.nn.Linear(2, 1)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
for step in range(3):
    loss = model(torch.randn(4, 2)).sum()
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
"""
HOSTFILE = "node1 slots=2\nnode2 slots=2\n"
STAND_IN = '#!/usr/bin/env bash\nprintf \'%s\\0\' "@@$(basename "$0")" "$@" >> "$ARGV_LOG"\n'  # @@: a call starts
LAUNCHERS = ("torchrun", "deepspeed", "horovodrun", "srun")
SLURM_JOB = {"SLURM_JOB_NODELIST": "node[1-2]", "SLURM_JOB_NUM_NODES": "2", "SLURM_JOB_ID": "7",
             "SLURM_JOB_CPUS_PER_NODE": "2(x2)"}


POSITIONS: dict[str, Callable[[str, str], str]] = {
    "appended": lambda base, char: base + char,
    "prepended": lambda base, char: char + base,
    "embedded": lambda base, char: base[:1] + char + base[1:],
}


def hostile(base: str, position: str) -> list[str]:
    """`base` with each character in that position (prepended: and a leading `-`)."""
    values = [POSITIONS[position](base, char) for char in CHARACTERS]
    return values + (["-" + base] if position == "prepended" else [])


@dataclass(frozen=True)
class Made:
    """What an accepted command wrote, and the argv of each stand-in its launchers called."""

    folder: Path
    files: list[Path]
    calls: list[list[str]]

    def words(self) -> list[str]:
        return [word for call in self.calls for word in call]

    def text(self, suffix: str) -> str:
        return next(path for path in self.files if path.name.endswith(suffix)).read_text()


@dataclass(frozen=True)
class Case:
    """One option: the name its refusal gives (None: the value itself, a path), a value it takes, the
    command line with a value in its place, and what an accepted value must become (None: no value
    but the option's own words is accepted). `creates`: the value names a file that must exist."""

    flag: str | None
    base: str
    command: Callable[[str], list[str]]
    arrives: Callable[[Made, str], None] | None
    creates: str | None = None


# ---------------------------------------------------------------------------------------------
# where a value must arrive


def exactly(word: str) -> Callable[[Made, str], None]:
    """The value, formatted into `word`, is one whole argv word of a stand-in."""
    def check(made: Made, value: str) -> None:
        assert word.format(value) in made.words(), made.calls
    return check


def number(word: str, base: str) -> Callable[[Made, str], None]:
    """A number: only whitespace around it was accepted, and the launcher holds the number."""
    def check(made: Made, value: str) -> None:
        assert value.strip() == base
        assert word.format(base) in made.words() or any(word.format(base) in path.read_text() for path in made.files)
    return check


def names_the_file(made: Made, value: str) -> None:
    """An argv word (or the manifest's command) is the file the value names."""
    words = made.words() or [word for path in made.files if path.suffix == ".yaml" for word in container(path)["command"]]
    assert any(os.path.lexists(made.folder / w) and os.path.samefile(made.folder / w, made.folder / value)
               for w in words), (value, made.calls)


def last_argument(made: Made, value: str) -> None:
    words = made.calls[-1] if made.calls else container(next(p for p in made.files if p.suffix == ".yaml"))["command"]
    assert words[-2:] == ["--note", value], words


def through_pdsh(then: Callable[[Made, str], None]) -> Callable[[Made, str], None]:
    """Several nodes by the deepspeed launcher: it hands pdsh the script and its arguments (those
    with a space in double quotes, `"` escaped), and pdsh joins them with spaces into the line a
    remote shell runs. That line, run by bash, must give back the very words (and create nothing)."""
    def check(made: Made, value: str) -> None:
        then(made, value)
        call = made.calls[-1]
        words = call[call.index("--master_port") + 2:]
        quoted = [f'"{word.replace(chr(34), chr(92) + chr(34))}"' if " " in word else word for word in words[1:]]
        remote = " ".join([words[0], *quoted])
        scratch = made.folder.parent / "remote"
        scratch.mkdir(exist_ok=True)
        ran = subprocess.run(["bash", "-c", "printf '%s\\0' " + remote], cwd=scratch, capture_output=True, timeout=30)
        assert ran.stdout.split(b"\0")[:-1] == [os.fsencode(word) for word in words], (remote, ran.stderr)
        assert not list(scratch.iterdir()), remote
    return check


def host_list(value: str) -> list[str]:
    """--hosts is split at commas; the space around each host is not part of it."""
    return [host.strip() for host in value.split(",") if host.strip()]


def horovod_hosts(made: Made, value: str) -> None:
    assert ",".join(host_list(value)) in made.words()


def deepspeed_hosts(made: Made, value: str) -> None:
    lines = [f"{host.split(':')[0]} slots={host.split(':')[1]}" for host in host_list(value)]
    assert made.text("hostfile").splitlines() == lines


def sbatch_line(option: str) -> Callable[[Made, str], None]:
    def check(made: Made, value: str) -> None:
        assert f"#SBATCH --{option}={value}" in made.text(".sh").splitlines()
    return check


def image(made: Made, value: str) -> None:
    assert container(next(p for p in made.files if p.suffix == ".yaml"))["image"] == value


def launcher_at(made: Made, value: str) -> None:
    assert made.folder / value in made.files and made.calls[-1][0] == "torchrun"


def config_file(made: Made, value: str) -> None:
    assert json.loads((made.folder / value).read_text())["zero_optimization"]["stage"] == 2
    assert value in string_constants(made.folder / "train.py")


def nvme_path(made: Made, value: str) -> None:
    config = json.loads((made.folder / "ds_config.json").read_text())
    assert config["zero_optimization"]["offload_optimizer"]["nvme_path"] == value


def converted_script(made: Made, value: str) -> None:
    """--shard: class names (split at commas, the space around each left out), matched by name in
    the converted script."""
    assert value.strip() in string_constants(made.folder / "train.py")


def converted_and_launched(made: Made, value: str) -> None:
    assert made.folder / value in made.files
    ast.parse((made.folder / value).read_text())
    names_the_file(made, value)


def container(path: Path) -> dict[str, object]:
    [spec] = yaml.safe_load(path.read_text())["spec"]["pytorchReplicaSpecs"]["Master"]["template"]["spec"]["containers"]
    return spec


def string_constants(path: Path) -> set[str]:
    return {node.value for node in ast.walk(ast.parse(path.read_text()))
            if isinstance(node, ast.Constant) and isinstance(node.value, str)}


# ---------------------------------------------------------------------------------------------
# the table


def launch(target: str, *options: str, script: str = "train.py", args: tuple[str, ...] = ()) -> list[str]:
    return ["launch", target, *options, "--", script, *args]


# how each launcher is asked for: one node, several, a host list, SLURM, Kubernetes
KINDS = {
    "ddp": ("ddp",), "ddp-nodes": ("ddp", "--nnodes=2", "--master-addr=10.0.0.1"), "deepspeed": ("deepspeed",),
    "deepspeed-hosts": ("deepspeed", "--hosts=node1:2,node2:2"), "horovod": ("horovod",),
    "horovod-hosts": ("horovod", "--hosts=node1:2,node2:2"),
    "ddp-slurm": ("ddp", "--scheduler=slurm", "--nnodes=2", "--nproc-per-node=2"),
    "horovod-slurm": ("horovod", "--scheduler=slurm", "--nnodes=2", "--nproc-per-node=2"),
    "fsdp-kubernetes": ("fsdp", "--scheduler=kubernetes", "--nproc-per-node=2", "--image=r/t:1"),
}
SLURM = ("ddp", "--scheduler=slurm", "--nproc-per-node=2")

CASES: dict[str, Case] = {
    "launch TARGET": Case("TARGET", "ddp", lambda v: launch(v), None),
    **{f"launch SCRIPT {kind}": Case("SCRIPT", "train.py", lambda v, k=kind: launch(*KINDS[k], script=v),
                                     through_pdsh(names_the_file) if kind == "deepspeed-hosts" else names_the_file,
                                     creates=SCRIPT)
       for kind in ("ddp", "deepspeed", "deepspeed-hosts", "horovod", "ddp-slurm", "fsdp-kubernetes")},
    **{f"launch SCRIPT_ARGS {kind}": Case("SCRIPT_ARGS", "ab", lambda v, k=kind: launch(*KINDS[k], args=("--note", v)),
                                          through_pdsh(last_argument) if kind == "deepspeed-hosts" else last_argument)
       for kind in KINDS},
    "launch --master-addr": Case("--master-addr", "10.0.0.1", lambda v: launch("ddp", "--nnodes=2", f"--master-addr={v}"),
                                 exactly("--rdzv-endpoint={}:29500")),
    "launch --nproc-per-node": Case("--nproc-per-node", "4", lambda v: launch("ddp", f"--nproc-per-node={v}"),
                                    exactly("--nproc-per-node={}")),
    "launch --scheduler": Case("--scheduler", "slurm", lambda v: launch("ddp", f"--scheduler={v}", "--nproc-per-node=2"),
                               None),
    "launch --rdzv-backend": Case("--rdzv-backend", "static",
                                  lambda v: launch(*KINDS["ddp-nodes"], f"--rdzv-backend={v}"), None),
    "launch --hosts horovod": Case("--hosts", "node1:2,node2:2", lambda v: launch("horovod", f"--hosts={v}"),
                                   horovod_hosts),
    "launch --hosts deepspeed": Case("--hosts", "node1:2,node2:2", lambda v: launch("deepspeed", f"--hosts={v}"),
                                     deepspeed_hosts),
    **{f"launch --hostfile {target}": Case("--hostfile", "hosts", lambda v, t=target: launch(t, f"--hostfile={v}"),
                                           names_the_file, creates=HOSTFILE)
       for target in ("horovod", "deepspeed")},
    "launch --partition": Case("--partition", "gpu", lambda v: launch(*SLURM, f"--partition={v}"), sbatch_line("partition")),
    "launch --time": Case("--time", "1:00:00", lambda v: launch(*SLURM, f"--time={v}"), sbatch_line("time")),
    "launch --memory-per-node": Case("--memory-per-node", "16Gi",
                                     lambda v: launch(*KINDS["fsdp-kubernetes"], f"--memory-per-node={v}"), None),
    "launch --image": Case("--image", "registry.example/train:1",
                           lambda v: launch("ddp", "--scheduler=kubernetes", "--nproc-per-node=2", f"--image={v}"), image),
    "launch --out": Case("--out", "run.sh", lambda v: launch("ddp", f"--out={v}"), launcher_at),
    "launch --nnodes": Case("--nnodes", "2", lambda v: launch("ddp", f"--nnodes={v}", "--master-addr=h"),
                            number("--nnodes={}", "2")),
    "launch --master-port": Case("--master-port", "29501", lambda v: launch("ddp", f"--master-port={v}"),
                                 number("--rdzv-endpoint=127.0.0.1:{}", "29501")),
    "launch --gpus-per-node": Case("--gpus-per-node", "2", lambda v: launch(*SLURM, f"--gpus-per-node={v}"),
                                   number("#SBATCH --gpus-per-node={}", "2")),
    "launch --cpus-per-node": Case("--cpus-per-node", "4", lambda v: launch(*SLURM, f"--cpus-per-node={v}"),
                                   number("#SBATCH --cpus-per-task={}", "4")),
    "to-ddp PATH": Case(None, "train.py", lambda v: ["to-ddp", "--write", "--", v], converted_and_launched,
                        creates=SCRIPT),
    **{f"to-{target} --nproc-per-node": Case("--nproc-per-node", "4",
                                             lambda v, t=target: [f"to-{t}", "--write", f"--nproc-per-node={v}", "train.py"],
                                             exactly("--nproc-per-node={}") if target != "horovod" else exactly("{}"))
       for target in ("ddp", "fsdp", "horovod")},
    "to-horovod --hosts": Case("--hosts", "node1:2,node2:2", lambda v: ["to-horovod", "--write", f"--hosts={v}", "train.py"],
                               horovod_hosts),
    "to-deepspeed --hosts": Case("--hosts", "node1:2,node2:2",
                                 lambda v: ["to-deepspeed", "--write", f"--hosts={v}", "train.py"], deepspeed_hosts),
    "to-deepspeed --config-out": Case("--config-out", "my_config.json",
                                      lambda v: ["to-deepspeed", "--write", f"--config-out={v}", "train.py"], config_file),
    "to-deepspeed --nvme-path": Case("--nvme-path", "/local_nvme", lambda v: [
        "to-deepspeed", "--write", "--offload-optimizer=nvme", f"--nvme-path={v}", "train.py"], nvme_path),
    "to-deepspeed --offload-optimizer": Case("--offload-optimizer", "cpu", lambda v: [
        "to-deepspeed", f"--offload-optimizer={v}", "train.py"], None),
    "to-deepspeed --offload-param": Case("--offload-param", "cpu", lambda v: [
        "to-deepspeed", "--zero=3", f"--offload-param={v}", "train.py"], None),
    "to-fsdp --mixed-precision": Case("--mixed-precision", "bf16", lambda v: [
        "to-fsdp", f"--mixed-precision={v}", "train.py"], None),
    "to-fsdp --shard": Case("--shard", "Linear", lambda v: ["to-fsdp", "--write", f"--shard={v}", "train.py"],
                            converted_script),
    "to-ddp --report": Case("--report", "json", lambda v: ["to-ddp", f"--report={v}", "train.py"], None),
}


# ---------------------------------------------------------------------------------------------
# running a case


@pytest.fixture(scope="module")
def stand_ins(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("stand-ins")
    for name in LAUNCHERS:
        (folder / name).write_text(STAND_IN)
        (folder / name).chmod(0o755)
    (folder / "scontrol").write_text("#!/usr/bin/env bash\nprintf 'node1\\nnode2\\n'\n")
    (folder / "scontrol").chmod(0o755)
    return folder


COMMAND = typer.main.get_command(app)  # built once: typer's CliRunner builds it again for every call


def invoke(args: list[str]) -> tuple[int, str]:
    """The exit status and stderr of `migrate ARGS`, run in this process; a crash is raised."""
    with CliRunner().isolation() as (_stdout, stderr, _output):
        try:
            COMMAND.main(args=args, prog_name="migrate")
            status = 0
        except SystemExit as stop:
            status = stop.code if isinstance(stop.code, int) else 1
        sys.stderr.flush()
        return status, stderr.getvalue().decode("utf-8", "replace")


@contextmanager
def inside(folder: Path) -> Iterator[None]:
    before = os.getcwd()
    os.chdir(folder)
    try:
        yield
    finally:
        os.chdir(before)


def snapshot(folder: Path) -> dict[Path, bytes]:
    return {path: path.read_bytes() for path in folder.rglob("*") if path.is_file()}


def run_launcher(launcher: Path, stand_ins: Path, log: Path) -> list[list[str]]:
    """bash -n, then run it with the stand-ins first on PATH; each stand-in's argv, in order."""
    checked = subprocess.run(["bash", "-n", str(launcher)], capture_output=True, text=True, timeout=30)
    assert checked.returncode == 0, checked.stderr
    log.write_bytes(b"")
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("MASTER_", "SLURM_", "NPROC", "NUM_", "PET_"))
             and k not in ("NODE_RANK", "RDZV_ID", "CUDA_VISIBLE_DEVICES", "PYTHON")}
    env = {**clean, **SLURM_JOB, "ARGV_LOG": str(log), "PATH": f"{stand_ins}{os.pathsep}{os.environ['PATH']}"}
    done = subprocess.run(["bash", str(launcher)], cwd=launcher.parent, env=env, capture_output=True, timeout=30)
    assert done.returncode == 0, done.stderr
    calls: list[list[str]] = []
    for word in os.fsdecode(log.read_bytes()).split("\0")[:-1]:
        if word.startswith("@@"):
            calls.append([word.removeprefix("@@")])
        else:
            calls[-1].append(word)
    return calls


def exercise(case: Case, value: str, folder: Path, stand_ins: Path) -> bool:
    """Run the case's command with `value`; True when it was accepted (and arrived), False when refused."""
    folder.mkdir()
    (folder / "train.py").write_text(SCRIPT)
    if case.creates is not None:
        try:
            (folder / value).write_text(case.creates)
        except (OSError, ValueError):  # a NUL: no file can have the name, and it must be refused
            pass
    before = snapshot(folder)
    with inside(folder):
        status, stderr = invoke(case.command(value))
    if status != 0:
        assert status == 2, (value, stderr)
        assert (case.flag or printable(value)) in " ".join(stderr.split()), (value, stderr)
        assert snapshot(folder) == before, (value, "written although refused")
        return False
    if case.arrives is None:
        return True
    made = snapshot(folder)
    files = sorted(path for path, data in made.items() if before.get(path) != data)
    calls = [call for path in files if made[path].startswith(b"#!/usr/bin/env bash\n")
             for call in run_launcher(path, stand_ins, folder.parent / "argv.log")]
    assert snapshot(folder) == made, (value, "running the launcher wrote a file")
    case.arrives(Made(folder, files, calls), value)
    return True


@pytest.mark.parametrize("position", POSITIONS)
@pytest.mark.parametrize("name", CASES)
def test_each_value_is_refused_by_name_or_arrives_as_given(name: str, position: str, tmp_path: Path,
                                                           stand_ins: Path) -> None:
    case = CASES[name]
    accepted = [value for i, value in enumerate(hostile(case.base, position))
                if exercise(case, value, tmp_path / str(i), stand_ins)]
    if case.arrives is None:
        assert accepted == []


def test_the_option_s_own_value_arrives(tmp_path: Path, stand_ins: Path) -> None:
    """The table's base values are accepted, so a refusal above is the character's doing."""
    for i, (name, case) in enumerate(CASES.items()):
        assert exercise(case, case.base, tmp_path / str(i), stand_ins), name


@pytest.mark.parametrize("host", ["node1:2\n", "node1\n", "node1:2\nnode2:2"])
def test_the_library_checks_whole_host_names(host: str) -> None:
    """The command line strips the space around each host; the library is given them as they are,
    and a `$`-anchored pattern would let a trailing newline through to horovodrun's -H."""
    from migrate.launch import LaunchPlan, problems as launch_problems
    from migrate.launch_command import launchable
    from migrate import DeepSpeedOptions, HorovodOptions
    from migrate.options import problems as option_problems
    from migrate.targets import targets

    for target, options in (("deepspeed", DeepSpeedOptions(hosts=(host,))), ("horovod", HorovodOptions(hosts=(host,)))):
        [problem] = option_problems(targets()[target], options)
        assert problem.flag == "--hosts"
        assert [p.flag for p in launch_problems(LaunchPlan(target=target, launcher=launchable()[target], script="train.py", hosts=(host,)))] == ["--hosts"]


@pytest.mark.parametrize("path", ["/nvme\0", "/nvme\n/x", "", "/nvme/\udcff"])
def test_an_nvme_folder_no_file_system_can_name_is_refused(path: str) -> None:
    from migrate import DeepSpeedOptions
    from migrate.options import problems as option_problems
    from migrate.targets import targets

    [problem] = option_problems(targets()["deepspeed"], DeepSpeedOptions(offload_optimizer="nvme", nvme_path=path))
    assert problem.flag == "--nvme-path"
