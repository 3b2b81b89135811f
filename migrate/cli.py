"""The `migrate` command line: one command per target, sharing one contract.

By default a command prints a unified diff (the converted scripts plus the files it would
create) and writes nothing; `--write` applies it; `--check` only says which files would change.
Findings go to stderr as `path:line:col: MIGnnn message`. Exit status: 0 done, 1 `--check`
found files to convert, 2 bad input (missing, undecodable, syntax error) or an internal error.
This module imports no libcst: the API does, when a command actually runs.
"""

from __future__ import annotations

import re
import sys
from typing import Annotated, Optional

import typer

from migrate.model import FileResult, InputError, Options

EXIT_OK, EXIT_WOULD_CHANGE, EXIT_BAD_INPUT = 0, 1, 2

app = typer.Typer(
    help=(
        "Turn a single-GPU PyTorch training script into a distributed one, with a diff you can review.\n\n"
        "Example: migrate to-ddp train.py | less   (review)   then   migrate to-ddp --write train.py"
    ),
    no_args_is_help=True,
    add_completion=False,
    rich_markup_mode=None,
    pretty_exceptions_enable=False,
)

Paths = Annotated[list[str], typer.Argument(help="Training scripts, or folders searched for *.py.", show_default=False)]
Write = Annotated[bool, typer.Option("--write", help="Rewrite the files in place and create the launch script (atomically).")]
Check = Annotated[bool, typer.Option("--check", help="Write nothing; list the files that would change; exit 1 if any.")]
Nproc = Annotated[str, typer.Option("--nproc-per-node", metavar="N", help="Processes per node in the launch script: a number, 'gpu' or 'auto'. Example: --nproc-per-node 8")]
KeepGlobalBatch = Annotated[bool, typer.Option("--keep-global-batch", help="Divide each DataLoader's batch_size by the world size, so the global batch stays what the script says (default: each process keeps the script's batch, the global batch grows).")]
ScaleLr = Annotated[bool, typer.Option("--scale-lr", help="Multiply the optimizer's lr by the world size (linear scaling for the larger global batch).")]
SyncBatchnorm = Annotated[bool, typer.Option("--sync-batchnorm", help="Convert BatchNorm layers to SyncBatchNorm before wrapping (applied only when CUDA is available: it cannot run on CPU).")]
ReportFormat = Annotated[str, typer.Option("--report", metavar="FORMAT", help="How findings are printed on stderr: text, markdown or json.")]


@app.callback()
def _commands() -> None:
    """Turn a single-GPU PyTorch training script into a distributed one, with a diff you can review."""


def _nproc(value: str) -> str:
    if value in ("auto", "gpu") or (value.isdigit() and int(value) > 0):
        return value
    raise typer.BadParameter(f"{value!r}: give a positive number, 'gpu' or 'auto'", param_hint="--nproc-per-node")


@app.command("to-ddp")
def to_ddp(
    paths: Paths,
    write: Write = False,
    check: Check = False,
    nproc_per_node: Nproc = "auto",
    keep_global_batch: KeepGlobalBatch = False,
    scale_lr: ScaleLr = False,
    sync_batchnorm: SyncBatchnorm = False,
    report: ReportFormat = "text",
) -> None:
    """DistributedDataParallel, launched by torchrun.

    Adds process-group setup (NCCL on GPUs, gloo on CPU; plain `python train.py` still runs as one
    process), a DistributedSampler with set_epoch, the model on the local rank's device wrapped in
    DDP, output and checkpoints on rank 0, no_sync() for gradient accumulation, and a launch script
    run_<script>_ddp.sh.

    Example: migrate to-ddp train.py > ddp.patch && git apply ddp.patch
    """
    options = Options(
        nproc_per_node=_nproc(nproc_per_node),
        keep_global_batch=keep_global_batch,
        scale_lr=scale_lr,
        sync_batchnorm=sync_batchnorm,
    )
    raise typer.Exit(run("ddp", paths, options, write=write, check=check, report=report))


Zero = Annotated[int, typer.Option("--zero", min=0, max=3, metavar="0-3", help="ZeRO stage: 0 (plain data parallel), 1 (shard optimizer state), 2 (+ gradients), 3 (+ weights).")]
OffloadOptimizer = Annotated[str, typer.Option("--offload-optimizer", metavar="none|cpu|nvme", help="Keep optimizer state in CPU memory or on NVMe (ZeRO 1-3).")]
OffloadParam = Annotated[str, typer.Option("--offload-param", metavar="none|cpu|nvme", help="Keep weights in CPU memory or on NVMe (ZeRO 3 only).")]
NvmePath = Annotated[str, typer.Option("--nvme-path", help="Folder on a local NVMe drive, for the nvme offloads.")]
Bf16 = Annotated[bool, typer.Option("--bf16", help="Train in bfloat16 (config bf16.enabled).")]
Fp16 = Annotated[bool, typer.Option("--fp16", help="Train in float16 with loss scaling (config fp16.enabled).")]
Fp32 = Annotated[bool, typer.Option("--fp32", help="Train in float32 even if the script uses AMP.")]
ConfigOut = Annotated[Optional[str], typer.Option("--config-out", metavar="PATH", help="Where to write the DeepSpeed config, relative to the script's folder (default: ds_config.json beside it).")]
Hosts = Annotated[Optional[str], typer.Option("--hosts", metavar="HOST:GPUS,...", help="Several nodes: write a hostfile and a multi-node launcher. Example: --hosts node1:8,node2:8")]

HOST = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*(:[1-9][0-9]*)?$")


@app.command("to-deepspeed")
def to_deepspeed(
    paths: Paths,
    zero: Zero = 2,
    offload_optimizer: OffloadOptimizer = "none",
    offload_param: OffloadParam = "none",
    nvme_path: NvmePath = "/local_nvme",
    bf16: Bf16 = False,
    fp16: Fp16 = False,
    fp32: Fp32 = False,
    config_out: ConfigOut = None,
    hosts: Hosts = None,
    write: Write = False,
    check: Check = False,
    report: ReportFormat = "text",
) -> None:
    """DeepSpeed engine (ZeRO 0-3), launched by the deepspeed launcher.

    deepspeed.initialize(model=..., optimizer=<your optimizer>) after both exist; engine.backward(loss)
    and engine.step() replace loss.backward() and optimizer.step(); zero_grad, GradScaler, autocast and
    clip_grad_norm_ go (the config does them); gradient accumulation and clipping move into
    ds_config.json, which the script reads and then overwrites with its own values (batch size,
    accumulation steps...) so the two never disagree. Also accepts --local_rank from the launcher,
    gathers weights on every rank before a rank-0 torch.save, and writes run_<script>_deepspeed.sh.
    Precision follows the script (GradScaler: fp16; bfloat16 autocast: bf16) unless you choose one.

    Example: migrate to-deepspeed --zero 3 --offload-param cpu train.py > ds.patch
    """
    for name, value in (("--offload-optimizer", offload_optimizer), ("--offload-param", offload_param)):
        if value not in ("none", "cpu", "nvme"):
            raise typer.BadParameter(f"{value!r}: choose none, cpu or nvme", param_hint=name)
    if offload_param != "none" and zero != 3:
        raise typer.BadParameter(f"offloading weights needs ZeRO stage 3 (got --zero {zero})", param_hint="--offload-param")
    if offload_optimizer != "none" and zero == 0:
        raise typer.BadParameter("offloading optimizer state needs ZeRO stage 1, 2 or 3", param_hint="--offload-optimizer")
    if sum((bf16, fp16, fp32)) > 1:
        raise typer.BadParameter("choose one of --bf16, --fp16, --fp32", param_hint="--bf16/--fp16/--fp32")
    host_list = tuple(h.strip() for h in hosts.split(",") if h.strip()) if hosts else ()
    for host in host_list:
        if not HOST.match(host):
            raise typer.BadParameter(f"{host!r}: write HOST or HOST:GPUS (letters, digits, . _ -)", param_hint="--hosts")
    precision = "bf16" if bf16 else "fp16" if fp16 else "fp32" if fp32 else "auto"
    options = Options(zero=zero, offload_optimizer=offload_optimizer, offload_param=offload_param,
                      nvme_path=nvme_path, precision=precision, config_out=config_out, hosts=host_list)
    raise typer.Exit(run("deepspeed", paths, options, write=write, check=check, report=report))


@app.command("verify")
def verify(
    script: Annotated[str, typer.Argument(help="The single-GPU training script to convert and check.", show_default=False)],
    script_args: Annotated[Optional[list[str]], typer.Argument(metavar="[-- SCRIPT_ARGS...]", help="Arguments for the script, after `--`.", show_default=False)] = None,
    target: Annotated[str, typer.Option("--target", metavar="ddp|deepspeed", help="The conversion to check.")] = "ddp",
    converted: Annotated[Optional[str], typer.Option("--converted", metavar="PATH", help="Check this already converted script instead of converting SCRIPT.")] = None,
    steps: Annotated[int, typer.Option("--steps", min=1, metavar="N", help="Optimizer steps each run takes before it is stopped.")] = 3,
    nproc: Annotated[int, typer.Option("--nproc", min=2, metavar="N", help="Processes the converted script runs with.")] = 2,
    timeout: Annotated[float, typer.Option("--timeout", min=5, metavar="SECONDS", help="After this long a rank counts as hung; its stack is reported.")] = 180.0,
    fake_data: Annotated[bool, typer.Option("--fake-data", help="Replace torchvision datasets (MNIST, CIFAR, ImageFolder...) with small synthetic ones: offline and fast.")] = False,
    compare: Annotated[bool, typer.Option("--compare", help="Deterministic scripts: also compare each step's loss and the final weights with the original run at nproc times its batch (shuffling turned off in both).")] = False,
    gpu: Annotated[bool, typer.Option("--gpu", help="Run on the GPUs (NCCL, one process per GPU) instead of the CPU with gloo.")] = False,
    zero: Zero = 2,
    report: Annotated[str, typer.Option("--report", metavar="FORMAT", help="text, markdown or json (on stdout).")] = "text",
    keep: Annotated[Optional[str], typer.Option("--keep", metavar="FOLDER", help="Keep the copies and per-rank records in FOLDER.")] = None,
) -> None:
    """Prove a conversion on your own script: run the original and the converted script, compare.

    Converts SCRIPT into a temporary copy of its folder (your files are only read), runs the
    original as one process and the converted script with --nproc processes under the target's
    launcher (torchrun; the deepspeed launcher), on the CPU with gloo, for --steps optimizer steps
    each. Checks: every rank reaches the steps; no rank hangs (its stack is shown); parameters stay
    identical across ranks; ranks see different samples; output and files come from rank 0 only;
    checkpoints keep the original's state-dict layout. Exit 0 passed, 1 a check failed, 2 could not
    run (bad input, or the original script itself fails).

    Example: migrate verify --fake-data train.py -- --epochs 1 --batch-size 8
    """
    from migrate.verify.report import RENDER
    from migrate.verify.session import VerifyOptions
    from migrate.verify.session import verify as run_verify

    if target not in ("ddp", "deepspeed"):
        raise typer.BadParameter(f"{target!r}: choose ddp or deepspeed", param_hint="--target")
    if report not in RENDER:
        raise typer.BadParameter(f"{report!r}: choose text, markdown or json", param_hint="--report")
    options = VerifyOptions(target=target, steps=steps, nproc=nproc, timeout=timeout, fake_data=fake_data, gpu=gpu, compare=compare,
                            converted=converted, script_args=tuple(script_args or ()), keep=keep,
                            options=Options(zero=zero) if target == "deepspeed" else Options())
    try:
        result = run_verify(script, options)
    except InputError as error:
        _error(str(error))
        raise typer.Exit(EXIT_BAD_INPUT) from None
    sys.stdout.write(RENDER[report](result))
    raise typer.Exit(result.exit_code)


def run(target: str, paths: list[str], options: Options, write: bool, check: bool, report: str) -> int:
    """Convert, then print or write. Returns the exit status."""
    from migrate import api
    from migrate import report as reports

    if report not in ("text", "markdown", "json"):
        _error(f"--report: unknown format {report!r} (text, markdown, json)")
        return EXIT_BAD_INPUT
    status = EXIT_OK
    results: list[FileResult] = []
    for outcome in api.migrate_paths(paths, target, options):
        if isinstance(outcome, InputError):
            _error(str(outcome))
            status = EXIT_BAD_INPUT
            continue
        results.append(outcome)
        if outcome.error:
            status = EXIT_BAD_INPUT
    _print_findings(results, report)
    changed = [r for r in results if r.changed and not r.error]
    if check:
        for result in changed:
            print(reports.display_path(result.path))
        return status or (EXIT_WOULD_CHANGE if changed else EXIT_OK)
    if write:
        return status or _write_all(changed)
    sys.stdout.write("".join(reports.result_diff(r) for r in changed))
    return status


def _write_all(results: list[FileResult]) -> int:
    from migrate import api
    from migrate.report import display_path

    try:
        for result in results:
            api.check_writable(result)
    except InputError as error:
        _error(str(error))
        return EXIT_BAD_INPUT
    for result in results:
        try:
            api.write_result(result)
        except InputError as error:
            _error(str(error))
            return EXIT_BAD_INPUT
        created = ", ".join(display_path(a.path) for a in result.artifacts)
        print(f"converted {display_path(result.path)}" + (f"; wrote {created}" if created else ""))
    return EXIT_OK


def _print_findings(results: list[FileResult], report: str) -> None:
    from migrate import report as reports

    if report == "json":
        sys.stderr.write(reports.findings_json(results) + "\n")
    elif report == "markdown":
        sys.stderr.write(reports.findings_markdown(results))
    else:
        for result in results:
            for line in reports.findings_text(result):
                sys.stderr.write(line + "\n")


def _error(message: str) -> None:
    sys.stderr.write(f"migrate: {message}\n")


def main() -> None:
    app()
