"""`migrate launch`: every target x scheduler renders a launcher that passes shellcheck (or a manifest
that parses), runs the launcher with the arguments exactly as given (the real launchers are replaced
by stand-ins that record their argv), re-makes itself from its own header, and refuses what it
cannot do with the option's name. `to-<target>` writes the same one-node launcher."""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from migrate.launch_command import launchable

ROOT = Path(__file__).resolve().parents[1]
SAMPLE = ROOT / "samples" / "mlp_regression" / "train.py"
SHELLCHECK = Path(sys.executable).parent / "shellcheck"
HOSTILE_ARGS = ["--note", "it's \"$HOME\" `id` $(id)", "a b", "--tab\tand\nnewline"]

# the options each combination is rendered with: one node, several
SEVERAL = {"none": ["--nnodes", "2", "--nproc-per-node", "4", "--master-addr", "10.0.0.1"],
           "slurm": ["--nnodes", "2", "--nproc-per-node", "4"],
           "kubernetes": ["--nnodes", "3", "--nproc-per-node", "8", "--image", "registry.example/train:1"]}
ONE = {"none": [], "slurm": ["--nproc-per-node", "2", "--gpus-per-node", "0"],
       "kubernetes": ["--nproc-per-node", "2", "--image", "registry.example/train:1"]}
HOSTS = {"deepspeed": ["--hosts", "node1:4,node-2:4"], "horovod": ["--hosts", "node1:4,node-2:4"]}

COMBINATIONS = [(t, s) for t, launcher in launchable().items() for s in launcher.schedulers]


def migrate(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "migrate", *args], cwd=cwd, capture_output=True, text=True,
                          timeout=60)


@pytest.fixture
def project(tmp_path: Path) -> Path:
    shutil.copy(SAMPLE, tmp_path / "train.py")
    return tmp_path


def several_options(target: str, scheduler: str) -> list[str]:
    if scheduler == "none" and target in HOSTS:
        return HOSTS[target]
    return SEVERAL[scheduler]


def written(result: subprocess.CompletedProcess[str], folder: Path) -> list[Path]:
    assert result.returncode == 0, result.stderr
    return [folder / line.removeprefix("wrote ") for line in result.stdout.splitlines()]


@pytest.mark.parametrize("several", [False, True])
@pytest.mark.parametrize(("target", "scheduler"), COMBINATIONS)
def test_every_combination_renders_a_checked_launcher(target: str, scheduler: str, several: bool,
                                                      project: Path) -> None:
    options = several_options(target, scheduler) if several else ONE[scheduler]
    launcher = written(migrate("launch", target, "train.py", "--scheduler", scheduler, *options, cwd=project),
                       project)[-1]
    text = launcher.read_text()
    if scheduler == "kubernetes":
        manifest = yaml.safe_load(text)
        assert (manifest["apiVersion"], manifest["kind"]) == ("kubeflow.org/v1", "PyTorchJob")
        return
    assert text.startswith("#!/usr/bin/env bash\n") and "\nset -euo pipefail\n" in text
    assert os.access(launcher, os.X_OK)
    check = subprocess.run([str(SHELLCHECK), "--severity=style", str(launcher)], capture_output=True, text=True)
    assert check.returncode == 0, check.stdout


def test_list_names_every_combination(project: Path) -> None:
    result = migrate("launch", "--list", cwd=project)
    assert result.returncode == 0, result.stderr
    listed = [tuple(line.split()[0:3:2]) for line in result.stdout.splitlines()]
    assert listed == COMBINATIONS


# ---------------------------------------------------------------------------------------------
# run with stand-ins: what each launcher passes to torchrun / deepspeed / horovodrun / srun


STAND_IN = """#!/usr/bin/env bash
printf '%s\\0' "$(basename "$0")" "$@" >> "$ARGV_LOG"
"""
SCONTROL = """#!/usr/bin/env bash
printf 'node1\\nnode2\\n'
"""


def run_with_stand_ins(launcher: Path, args: list[str], env: dict[str, str], tmp: Path) -> list[list[str]]:
    """Run the launcher with torchrun, deepspeed, horovodrun, srun and scontrol replaced; the argv of
    each stand-in called, in order."""
    bin_dir = tmp / "stand-ins"
    bin_dir.mkdir(exist_ok=True)
    for name in ("torchrun", "deepspeed", "horovodrun", "srun"):
        (bin_dir / name).write_text(STAND_IN)
    (bin_dir / "scontrol").write_text(SCONTROL)
    for tool in bin_dir.iterdir():
        tool.chmod(0o755)
    log = tmp / "argv.log"
    log.write_bytes(b"")
    clean = {k: v for k, v in os.environ.items()
             if not k.startswith(("MASTER_", "SLURM_", "NPROC", "NUM_", "PET_"))
             and k not in ("NODE_RANK", "RDZV_ID", "CUDA_VISIBLE_DEVICES", "PYTHON")}
    done = subprocess.run(["bash", str(launcher), *args], cwd=launcher.parent,
                          env={**clean, **env, "ARGV_LOG": str(log), "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}"},
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    words = log.read_bytes().decode().split("\0")[:-1]
    calls, current = [], []
    for word in words:
        if word in ("torchrun", "deepspeed", "horovodrun", "srun") and current:
            calls.append(current)
            current = []
        current.append(word)
    return calls + [current]


@pytest.mark.parametrize("several", [False, True])
@pytest.mark.parametrize(("target", "scheduler"), [c for c in COMBINATIONS if c[1] != "kubernetes"])
def test_arguments_reach_the_script_as_given(target: str, scheduler: str, several: bool, tmp_path: Path) -> None:
    """A script in a folder and under a name with quotes, `$` and backticks, arguments fixed at
    `migrate launch` time and more given to the launcher: the script's argv is exactly those words,
    and nothing else ran (`set -u` would stop at an unbound `$x`, a backtick would run a command)."""
    folder = tmp_path / "it's a \"$HOME\" `id` folder"
    folder.mkdir()
    shutil.copy(SAMPLE, folder / "train $USER `v2`'s.py")
    options = several_options(target, scheduler) if several else ONE[scheduler]
    result = migrate("launch", target, "train $USER `v2`'s.py", "--scheduler", scheduler, *options, "--",
                     *HOSTILE_ARGS[:2], cwd=folder)
    if target == "deepspeed" and "--hosts" in options:  # pdsh would hand these words to a remote shell as they are
        assert result.returncode == 2 and "the deepspeed launcher's pdsh joins the command" in result.stderr
        return
    launcher = written(result, folder)[-1]
    env = {"SLURM_JOB_NODELIST": "node[1-2]", "SLURM_JOB_NUM_NODES": "2", "SLURM_JOB_ID": "7",
           "SLURM_JOB_CPUS_PER_NODE": "2(x2)"}
    calls = run_with_stand_ins(launcher, HOSTILE_ARGS[2:], env, tmp_path)
    argv = calls[-1]
    script_at = next(i for i, word in enumerate(argv) if word.endswith("train $USER `v2`'s.py"))
    assert Path(folder, argv[script_at]).resolve() == (folder / "train $USER `v2`'s.py").resolve()
    assert argv[script_at + 1:] == HOSTILE_ARGS
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([folder.name, "stand-ins", "argv.log"])


def one_node_torchrun_argv(project: Path, tmp_path: Path, *options: str) -> list[str]:
    launcher = written(migrate("launch", "ddp", "train.py", *options, cwd=project), project)[-1]
    [argv] = run_with_stand_ins(launcher, [], {}, tmp_path)
    return argv


def test_the_one_node_launcher_takes_a_free_port_unless_master_port_is_set(project: Path, tmp_path: Path) -> None:
    argv = one_node_torchrun_argv(project, tmp_path, "--nproc-per-node", "2")
    assert argv[:4] == ["torchrun", "--standalone", "--nnodes=1", "--nproc-per-node=2"]
    launcher = project / "run_train_ddp.sh"
    [argv] = run_with_stand_ins(launcher, [], {"MASTER_PORT": "29611"}, tmp_path)
    assert argv[1:3] == ["--rdzv-backend=c10d", "--rdzv-endpoint=127.0.0.1:29611"]


def test_the_deepspeed_hostfile_launcher_runs_without_ssh_when_given_a_node_rank(project: Path,
                                                                                 tmp_path: Path) -> None:
    [_hostfile, launcher] = written(migrate("launch", "deepspeed", "train.py", "--hosts", "node1:4,node2:4",
                                            cwd=project), project)
    [by_ssh] = run_with_stand_ins(launcher, [], {}, tmp_path)
    assert "--no_ssh" not in by_ssh and by_ssh[1:3] == ["--hostfile", str(project / "hostfile")]
    [each_node] = run_with_stand_ins(launcher, [], {"NODE_RANK": "1"}, tmp_path)
    assert each_node[1:4] == ["--no_ssh", "--node_rank", "1"]


@pytest.mark.parametrize(("visible", "processes"), [("0,1,2", "3"), ("", str(os.cpu_count())), ("GPU-5f2a", "1")])
def test_the_one_node_horovod_launcher_counts_the_visible_gpus(visible: str, processes: str, project: Path,
                                                               tmp_path: Path) -> None:
    """As torchrun's `auto`: the GPUs CUDA_VISIBLE_DEVICES leaves, else one process per CPU core."""
    [launcher] = written(migrate("launch", "horovod", "train.py", cwd=project), project)
    [argv] = run_with_stand_ins(launcher, [], {"CUDA_VISIBLE_DEVICES": visible}, tmp_path)
    assert argv[1:5] == ["-np", processes, "-H", f"localhost:{processes}"]


def test_the_slurm_step_gets_the_job_cpus_and_a_port_of_its_own(project: Path, tmp_path: Path) -> None:
    """srun does not inherit --cpus-per-task from sbatch; the rendezvous port follows the job id, so
    two jobs sharing a node do not meet (MASTER_PORT still wins)."""
    [launcher] = written(migrate("launch", "ddp", "train.py", "--scheduler", "slurm", "--nnodes", "2",
                                 "--nproc-per-node", "4", "--cpus-per-node", "32", cwd=project), project)
    assert "#SBATCH --cpus-per-task=32\n#SBATCH --gpus-per-node=4\n" in launcher.read_text()
    env = {"SLURM_JOB_NODELIST": "node[1-2]", "SLURM_JOB_NUM_NODES": "2", "SLURM_JOB_ID": "45007",
           "SLURM_JOB_CPUS_PER_NODE": "32(x2)"}
    srun, torchrun = run_with_stand_ins(launcher, [], env, tmp_path)  # srun's words, then the command it runs
    assert srun == ["srun", "--ntasks-per-node=1", "--cpus-per-task=32"]
    assert torchrun[:5] == ["torchrun", "--nnodes=2", "--nproc-per-node=4", "--rdzv-id=45007", "--rdzv-backend=c10d"]
    assert torchrun[5] == "--rdzv-endpoint=node1:25007"
    _srun, torchrun = run_with_stand_ins(launcher, [], {**env, "MASTER_PORT": "29900"}, tmp_path)
    assert torchrun[5] == "--rdzv-endpoint=node1:29900"


def test_the_kubernetes_command_is_the_one_node_torchrun_command(project: Path, tmp_path: Path) -> None:
    """Master and Workers run torchrun as the one-node launcher does, without its rendezvous flags:
    the operator gives each pod PET_NNODES, PET_NODE_RANK and the Master's address."""
    common = ["--nproc-per-node", "4", "--", "--epochs", "3"]
    argv = one_node_torchrun_argv(project, tmp_path, *common)
    [path] = written(migrate("launch", "ddp", "train.py", "--scheduler", "kubernetes", "--nnodes", "3",
                             "--image", "registry.example/train:1", *common, cwd=project), project)
    manifest = yaml.safe_load(path.read_text())
    assert manifest["metadata"]["name"] == "train-ddp"
    assert manifest["spec"]["nprocPerNode"] == "4"
    replicas = manifest["spec"]["pytorchReplicaSpecs"]
    assert {name: spec["replicas"] for name, spec in replicas.items()} == {"Master": 1, "Worker": 2}
    one_node = [word for word in argv if word not in ("--standalone", "--nnodes=1")]
    one_node = [os.path.basename(word) if word.endswith("train.py") else word for word in one_node]
    for spec in replicas.values():
        [container] = spec["template"]["spec"]["containers"]
        assert container["name"] == "pytorch" and container["image"] == "registry.example/train:1"
        assert container["command"] == one_node
        assert container["resources"] == {"requests": {"cpu": 16, "memory": "64Gi"},
                                          "limits": {"cpu": 16, "memory": "64Gi", "nvidia.com/gpu": 4}}
        assert container["volumeMounts"] == [{"name": "dshm", "mountPath": "/dev/shm"}]
        assert spec["template"]["spec"]["volumes"] == [{"name": "dshm", "emptyDir": {"medium": "Memory"}}]


def test_the_manifest_keeps_every_argument_as_given(project: Path) -> None:
    [path] = written(migrate("launch", "fsdp", "train.py", "--scheduler", "kubernetes", "--nproc-per-node", "2",
                             "--image", "r/t:1", "--", *HOSTILE_ARGS, cwd=project), project)
    manifest = yaml.safe_load(path.read_text())
    [container] = manifest["spec"]["pytorchReplicaSpecs"]["Master"]["template"]["spec"]["containers"]
    assert container["command"] == ["torchrun", "--nproc-per-node=2", "train.py", *HOSTILE_ARGS]
    assert "Worker" not in manifest["spec"]["pytorchReplicaSpecs"]


# ---------------------------------------------------------------------------------------------
# made and re-made the same way


def remake_line(text: str) -> str:
    lines = text.splitlines()
    at = next(i for i, line in enumerate(lines) if "re-make it (in " in line and ") with:" in line)
    return lines[at + 1].removeprefix("#").strip()


@pytest.mark.parametrize(("command", "launcher"), [
    (["to-ddp", "--write", "--nproc-per-node", "4"], "run_train_ddp.sh"),
    (["to-fsdp", "--write"], "run_train_fsdp.sh"),
    (["to-deepspeed", "--write", "--hosts", "node1:8,node2:8"], "run_train_deepspeed_hosts.sh"),
    (["to-horovod", "--write", "--nproc-per-node", "2"], "run_train_horovod.sh"),
    (["launch", "ddp", "--scheduler", "slurm", "--nproc-per-node", "8", "--time", "1:00:00", "--", "--lr", "a b"],
     "run_train_ddp_slurm.sh"),
    (["launch", "fsdp", "--scheduler", "kubernetes", "--nnodes", "2", "--nproc-per-node", "8", "--image", "r/t:1"],
     "train_fsdp_pytorchjob.yaml"),
    (["launch", "horovod", "--hostfile", "hosts", "--out", "launchers/run.sh"], "launchers/run.sh"),
    (["launch", "deepspeed", "--no-local-rank"], "run_train_deepspeed.sh"),
    (["launch", "ddp", "--scheduler", "slurm", "--nproc-per-node", "2", "--cpus-per-node", "16",
      "--gpus-per-node", "2", "--partition", "a100"], "run_train_ddp_slurm.sh"),
])
def test_a_launcher_re_makes_itself_from_its_header(command: list[str], launcher: str, project: Path) -> None:
    """The command in the header, run in the launcher's folder, writes the same bytes (and --force is
    not needed: an identical file is left as it is)."""
    (project / "hosts").write_text("node1 slots=2\nnode2 slots=2\n")
    (project / "launchers").mkdir()
    at = command.index("--") if "--" in command else len(command)
    result = migrate(*command[:at], "train.py", *command[at:], cwd=project)
    assert result.returncode == 0, result.stderr
    made = (project / launcher).read_text()
    line = remake_line(made)
    assert line.startswith("migrate launch ")
    (project / launcher).unlink()
    again = migrate(*shlex.split(line)[1:], cwd=(project / launcher).parent)
    assert again.returncode == 0, again.stderr
    assert (project / launcher).read_text() == made


# ---------------------------------------------------------------------------------------------
# what it refuses, and how


@pytest.mark.parametrize(("args", "said"), [
    (["dp", "train.py"], "'dp': choose ddp, deepspeed, fsdp, horovod (to-dp runs as plain `python`"),
    (["deepspeed", "train.py", "--scheduler", "kubernetes"], "deepspeed has no kubernetes launcher"),
    (["ddp", "train.py", "--scheduler", "pbs"], "'pbs': choose none, slurm or kubernetes"),
    (["ddp", "train.py", "--scheduler", "slurm"], "slurm needs a number"),
    (["ddp", "train.py", "--nproc-per-node", "lots"], "'lots': give a number from 1 to 4096"),
    (["ddp", "train.py", "--nnodes", "0"], "0: give a number from 1 to 4096"),
    (["ddp", "train.py", "--hosts", "a:2,b:2"], "torchrun does not read a host list"),
    (["deepspeed", "train.py", "--nnodes", "2"], "deepspeed reaches the other nodes through a host list"),
    (["horovod", "train.py", "--nnodes", "2", "--nproc-per-node", "4"], "horovodrun reaches the other nodes"),
    (["horovod", "train.py", "--master-port", "2000"], "horovodrun chooses its own rendezvous ports"),
    (["ddp", "train.py", "--scheduler", "kubernetes", "--nproc-per-node", "2", "--image", "i", "--master-port", "2000"],
     "the training operator gives each pod"),
    (["ddp", "train.py", "--master-addr", "10.0.0.1"], "is for several nodes (--nnodes 2 or more)"),
    (["deepspeed", "train.py", "--master-addr", "10.0.0.1"], "deepspeed on several nodes takes --hosts"),
    (["ddp", "train.py", "--rdzv-backend", "static"], "is for several nodes"),
    (["horovod", "train.py", "--hosts", "a:2", "--nnodes", "3"], "--nnodes 3 but 1 hosts"),
    (["ddp", "train.py", "--rdzv-backend", "etcd"], "'etcd': choose c10d"),
    (["deepspeed", "train.py", "--rdzv-backend", "static", "--nnodes", "2"], "only torchrun started by hand"),
    (["ddp", "train.py", "--master-port", "70000"], "70000: give a port from 1 to 65535"),
    (["ddp", "train.py", "--nnodes", "2", "--master-addr", "a;b"], "'a;b': give a host name or an IP address"),
    (["ddp", "train.py", "--scheduler", "slurm", "--nproc-per-node", "2", "--master-addr", "x"],
     "under slurm the first node of the job is the master"),
    (["ddp", "train.py", "--partition", "gpu"], "is a SLURM option: add --scheduler slurm"),
    (["ddp", "train.py", "--scheduler", "slurm", "--nproc-per-node", "2", "--time", "1 day"], "'1 day': letters"),
    (["ddp", "train.py", "--scheduler", "kubernetes", "--nproc-per-node", "2"], "name the one that holds it"),
    (["ddp", "train.py", "--gpus-per-node", "2"], "add --scheduler"),
    (["ddp"], "give TARGET and SCRIPT"),
    (["deepspeed", "train.py", "--hosts", "n1:2,n1:2"], "--hosts: n1 is named twice; give each host once"),
    (["ddp", "train.py", "--cpus-per-node", "8"], "--cpus-per-node: is what a SLURM or Kubernetes job requests"),
    (["ddp", "train.py", "--scheduler", "slurm", "--nproc-per-node", "2", "--memory-per-node", "8Gi"],
     "--memory-per-node: is what a Kubernetes pod requests"),
    (["ddp", "train.py", "--out", "train.py"], "it is the script itself (check --out)"),
    (["ddp", "train.py", "--out", "."], "is a folder; the file generated for train.py needs a file name there (check --out)"),
    (["ddp", "train.py", "--out", "newdir/"], "--out: 'newdir/' names a folder: give a file name, e.g. newdir/run_train_ddp.sh"),
    (["horovod", "train.py", "--hostfile", "hosts", "--out", "hosts", "--force"], "--out: is the hostfile the launcher reads"),
    (["horovod", "train.py", "--hosts", " , "], "--hosts: ' , ' names no host"),
    (["horovod", "train.py", "--hostfile", ""], "--hostfile: '': the name is empty"),
    (["deepspeed", "train.py", "--hosts", "a:2,b:2", "--out", "hostfile"], "the launcher and its hostfile would both be this file"),
    (["ddp", "train.py", "--epochs", "3"], "arguments for the training script go after `--`"),
])
def test_what_cannot_be_launched_is_refused_by_option(args: list[str], said: str, project: Path) -> None:
    (project / "hosts").write_text("node1 slots=2\n")
    result = migrate("launch", *args, cwd=project)
    assert result.returncode == 2
    assert said in " ".join(result.stderr.split()), result.stderr
    assert sorted(p.name for p in project.iterdir()) == ["hosts", "train.py"]
    assert (project / "hosts").read_text() == "node1 slots=2\n"


def test_a_process_count_is_written_as_a_plain_number(project: Path) -> None:
    """010 is 10 to horovodrun and SLURM but 8 to bash arithmetic: the launcher says 10 everywhere."""
    result = migrate("launch", "horovod", "train.py", "--scheduler", "slurm", "--nnodes", "2", "--nproc-per-node",
                     "010", "--out", "-", cwd=project)
    assert result.returncode == 0, result.stderr
    assert "-np $((10 * SLURM_JOB_NUM_NODES))" in result.stdout and "010" not in result.stdout


def test_a_missing_script_is_an_error(project: Path) -> None:
    result = migrate("launch", "ddp", "trian.py", cwd=project)
    assert result.returncode == 2
    assert "migrate: trian.py: no such file (the launcher starts it: give the converted script)" in result.stderr
    (project / "folder").mkdir()
    assert "migrate: folder: is a folder" in migrate("launch", "ddp", "folder", cwd=project).stderr


@pytest.mark.parametrize(("target", "text", "said"), [
    ("deepspeed", "# the cluster\nnode1 slots=4\n  node2 gpus=4\n", "hosts:3:3: 'node2 gpus=4': write `HOST slots=N`"),
    ("deepspeed", "node1 slots = 4\n", "hosts:1:1: 'node1 slots = 4': write `HOST slots=N`"),
    ("deepspeed", "node1 slots=4\nnode1 slots=4\n", "hosts:2:1: node1 is named twice"),
    ("horovod", "# the cluster\nnode1 slots=4\n", "hosts:1:1: '# the cluster': write `HOST slots=N`; horovodrun "
                "reads every line as a host: no blank lines or comments"),
    ("horovod", "node1 slots=4\n\nnode2 slots=4\n", "hosts:2:1: a blank line: write `HOST slots=N`"),
    ("horovod", "node1 slots=4 # first\n", "hosts:1:1: 'node1 slots=4 # first'"),
    ("horovod", "", "hosts: names no host"),
])
def test_a_hostfile_its_launcher_would_reject_is_refused(target: str, text: str, said: str, project: Path) -> None:
    """As strict as the launcher that reads it: horovodrun reads every line as `HOST slots=N`."""
    (project / "hosts").write_text(text)
    result = migrate("launch", target, "train.py", "--hostfile", "hosts", cwd=project)
    assert result.returncode == 2
    assert said in " ".join(result.stderr.split()), result.stderr


def test_a_hostfile_gives_hosts_and_process_count(project: Path) -> None:
    (project / "hosts").write_text("node1 slots=4\nnode2 slots=2\n")
    [launcher] = written(migrate("launch", "horovod", "train.py", "--hostfile", "hosts", cwd=project), project)
    assert 'exec horovodrun -np 6 --hostfile "$here"/hosts' in launcher.read_text()
    (project / "hosts").write_text("# DeepSpeed skips comments and blank lines\nnode1 slots=4  # first\n\nnode2 slots=2\n")
    [launcher] = written(migrate("launch", "deepspeed", "train.py", "--hostfile", "hosts", cwd=project), project)
    assert '--num_nodes 2 \\\n    --master_addr "${MASTER_ADDR:-node1}"' in launcher.read_text()


def test_an_existing_different_launcher_is_kept_unless_forced(project: Path) -> None:
    mine = project / "run_train_ddp.sh"
    mine.write_text("#!/bin/sh\necho my own\n")
    kept = migrate("launch", "ddp", "train.py", cwd=project)
    assert kept.returncode == 2
    assert ("run_train_ddp.sh: exists and differs from the launcher generated for train.py; it is kept: move it "
            "away, write another with --out PATH, or replace it with --force") in kept.stderr
    assert "nothing was written" in kept.stderr and mine.read_text() == "#!/bin/sh\necho my own\n"
    forced = migrate("launch", "ddp", "train.py", "--force", cwd=project)
    assert forced.returncode == 0, forced.stderr
    assert "exec torchrun" in mine.read_text()


def test_force_never_replaces_a_hostfile(project: Path) -> None:
    hostfile = project / "hostfile"
    hostfile.write_text("mine slots=4\n")
    result = migrate("launch", "deepspeed", "train.py", "--hosts", "a:8,b:8", "--force", cwd=project)
    assert result.returncode == 2
    assert ("hostfile: exists with other hosts than --hosts gives; it is kept (--force replaces launchers only): "
            "move it away, or launch with --hostfile") in " ".join(result.stderr.split())
    assert hostfile.read_text() == "mine slots=4\n" and not (project / "run_train_deepspeed_hosts.sh").exists()


def test_out_dash_prints_and_writes_nothing(project: Path) -> None:
    result = migrate("launch", "ddp", "train.py", "--nnodes", "2", "--out", "-", cwd=project)
    assert result.returncode == 0 and result.stdout.startswith("#!/usr/bin/env bash\n")
    assert sorted(p.name for p in project.iterdir()) == ["train.py"]


def test_host_list_launchers_do_not_replace_the_one_node_one(project: Path) -> None:
    assert migrate("to-horovod", "--write", "train.py", cwd=project).returncode == 0
    [launcher] = written(migrate("launch", "horovod", "train.py", "--hosts", "h1:4,h2:4", cwd=project), project)
    assert launcher.name == "run_train_horovod_hosts.sh"
    assert "-H h1:4,h2:4" in launcher.read_text() and "localhost" in (project / "run_train_horovod.sh").read_text()


def test_names_a_launcher_cannot_take_as_they_are(tmp_path: Path) -> None:
    """A script named -train.py is ./-train.py on every command line; 2_train.py's job is job-2-train-ddp."""
    shutil.copy(SAMPLE, tmp_path / "-train.py")
    [launcher] = written(migrate("launch", "ddp", "./-train.py", cwd=tmp_path), tmp_path)
    assert launcher.name == "run_-train_ddp.sh"
    assert "#   migrate launch ddp ./-train.py\n" in launcher.read_text()
    [slurm] = written(migrate("launch", "ddp", "./-train.py", "--scheduler", "slurm", "--nproc-per-node", "1",
                              cwd=tmp_path), tmp_path)
    assert "script=./-train.py\n" in slurm.read_text()
    shutil.copy(SAMPLE, tmp_path / "2_train.py")
    [manifest] = written(migrate("launch", "ddp", "2_train.py", "--scheduler", "kubernetes", "--nproc-per-node",
                                 "1", "--image", "i:1", cwd=tmp_path), tmp_path)
    assert yaml.safe_load(manifest.read_text())["metadata"]["name"] == "job-2-train-ddp"
    long = "train_transformer_language_model_with_mixed_precision_and_ema.py"
    shutil.copy(SAMPLE, tmp_path / long)
    [manifest] = written(migrate("launch", "fsdp", long, "--scheduler", "kubernetes", "--nnodes", "2",
                                 "--nproc-per-node", "1", "--image", "i:1", cwd=tmp_path), tmp_path)
    name = yaml.safe_load(manifest.read_text())["metadata"]["name"]
    assert name == "train-transformer-language-model-with-mixe-fsdp"  # its Services: <name>-worker-<i>, <= 63
    assert len(f"{name}-worker-99999999") <= 63


def test_the_manifest_names_the_script_as_given(tmp_path: Path) -> None:
    """The command's path is the one `migrate launch` was given (its path in the image), wherever
    the manifest is written; the header re-makes it from that same folder."""
    (tmp_path / "src").mkdir()
    (tmp_path / "k8s").mkdir()
    shutil.copy(SAMPLE, tmp_path / "src" / "train.py")
    [manifest] = written(migrate("launch", "ddp", "src/train.py", "--scheduler", "kubernetes", "--nproc-per-node",
                                 "1", "--image", "i:1", "--out", "k8s/job.yaml", cwd=tmp_path), tmp_path)
    made = manifest.read_text()
    [container] = yaml.safe_load(made)["spec"]["pytorchReplicaSpecs"]["Master"]["template"]["spec"]["containers"]
    assert container["command"][2] == "src/train.py"
    assert remake_line(made) == ("migrate launch ddp src/train.py --scheduler kubernetes --nproc-per-node 1 "
                                 "--image i:1 --out k8s/job.yaml")


def test_out_elsewhere_reaches_the_script_from_there(project: Path, tmp_path: Path) -> None:
    (project / "launchers").mkdir()
    [launcher] = written(migrate("launch", "ddp", "train.py", "--out", "launchers/run.sh", cwd=project), project)
    assert '"$here"/../train.py "$@"' in launcher.read_text()
    assert "#   migrate launch ddp ../train.py --out run.sh" in launcher.read_text()


def test_a_script_not_yet_converted_gets_a_note(project: Path) -> None:
    result = migrate("launch", "ddp", "train.py", cwd=project)
    assert result.returncode == 0
    assert ("train.py: note: no `init_process_group` or `DistributedDataParallel` in it: it does not look "
            "converted to ddp; `migrate to-ddp --write train.py` converts it") in result.stderr
    migrate("to-ddp", "--write", "train.py", cwd=project)
    (project / "run_train_ddp.sh").unlink()
    assert "note" not in migrate("launch", "ddp", "train.py", cwd=project).stderr
