"""The stable finding codes. Each code means one thing forever; README.md documents them all.

MIG0xx: what was done to the file as a whole. MIG1xx: a manual step left for the user.
MIG9xx: the tool failed on this file. The codes here are shared by every target; a code only one
target can report is that target's own (`Target.codes`), declared beside its steps and handed
here by the registry (`declare`), which this module never imports.
"""

from __future__ import annotations

from collections.abc import Mapping

from migrate.records import Finding, Severity

CODES: dict[str, tuple[Severity, str]] = {
    "MIG001": (Severity.NOTE, "the script already uses the target framework; left unchanged"),
    "MIG002": (Severity.NOTE, "not a training script (no backward pass or optimizer step); left unchanged"),
    "MIG003": (Severity.NOTE, "nn.DataParallel replaced by the target's wrapper"),
    "MIG004": (Severity.NOTE, "a one-off choice the conversion made that the reviewer should know"),
    "MIG005": (Severity.NOTE, "how --write treats this file: a hard link replaced under one name, a file --write would refuse"),
    "MIG006": (Severity.NOTE, "what the target itself is for and where it stops: the same for every script it converts"),
    "MIG007": (Severity.NOTE, "the running sums of the training loop that the script prints are reduced over every rank "
               "after the loop (dist.all_reduce: summed, or averaged where the print divides by len(loader))"),
    "MIG008": (Severity.NOTE, "batches drawn from a seeded global generator in the training loop are reseeded per rank "
               "(seed + rank) after the weights are made equal; an unseeded one already differs per rank"),
    "MIG101": (Severity.WARNING, "no DataLoader feeds the training loop: shard the data by rank by hand"),
    "MIG102": (Severity.WARNING, "a DataLoader has its own sampler: kept, so every rank sees all of it"),
    "MIG103": (Severity.WARNING, "no epoch loop found around the training loader: call sampler.set_epoch(epoch) yourself"),
    "MIG104": (Severity.WARNING, "no model found to wrap: wrap it by hand"),
    "MIG105": (Severity.WARNING, "a model method other than forward is called in training: it bypasses the wrapper"),
    "MIG106": (Severity.WARNING, "a checkpoint or file is written by a helper from another module: write it on rank 0 only"),
    "MIG107": (Severity.NOTE, "SyncBatchNorm only works with CUDA; the conversion applies it only there"),
    "MIG108": (Severity.WARNING, "the entry point could not be found: process-group setup placed at module level"),
    "MIG109": (Severity.WARNING, "gradient accumulation found but not wrapped in no_sync(): correct, but syncs every micro-step"),
    "MIG110": (Severity.WARNING, "ReduceLROnPlateau is stepped on a metric that may differ per rank: all-reduce it first"),
    "MIG111": (Severity.WARNING, "a DataLoader is built from an iterable dataset: it cannot take a sampler; shard it by rank by hand"),
    "MIG112": (Severity.WARNING, "a print or log call runs work that may be collective: its value is computed on every rank"),
    "MIG113": (Severity.WARNING, "several models are trained, and one DeepSpeed engine per model cannot be built or would train differently: left unchanged"),
    "MIG114": (Severity.WARNING, "the optimizer is not built beside the model: pass it to the engine by hand"),
    "MIG115": (Severity.WARNING, "torch.compile runs before the engine is created: use the engine's compile() instead"),
    "MIG116": (Severity.WARNING, "a value of the script cannot be read where the engine is created: the config fixes it"),
    "MIG117": (Severity.WARNING, "backward or the optimizer step runs where the engine is not reachable: call it there by hand"),
    "MIG118": (Severity.WARNING, "DeepSpeed: the optimizer's state_dict is one rank's shard under ZeRO 1-3 and cannot be loaded back: left unchanged"),
    "MIG119": (Severity.WARNING, "no entry point: the file only defines functions and classes (a library module); left unchanged"),
    "MIG120": (Severity.WARNING, "every rank touches the same file or directory and the conversion could not make it safe: do it on one rank"),
    "MIG121": (Severity.WARNING, "a loop is left or a step skipped on a value of this rank's own batch: ranks diverge and hang"),
    "MIG122": (Severity.WARNING, "a random number of backward passes: unless every rank draws the same, ranks diverge and hang"),
    "MIG123": (Severity.WARNING, "weights are drawn again after the wrapper copied rank 0's: the replicas train apart"),
    "MIG124": (Severity.WARNING, "the model or the training loader is built at import time but training starts in a function: left unchanged"),
    "MIG125": (Severity.WARNING, "a number the DeepSpeed config needs is unusable (negative, infinite, not whole): left unchanged"),
    "MIG126": (Severity.WARNING, "DeepSpeed: the converted script updates differently from the original where the conversion cannot avoid it; the message says when and what to choose"),
    "MIG127": (Severity.WARNING, "DeepSpeed: the script reads, loads or pickles the model's weights outside the engine after deepspeed.initialize, where ZeRO holds shards or DeepSpeed cannot follow; pickling the module, or reading gradients after initialize, leaves the file unchanged"),
    "MIG128": (Severity.WARNING, "DeepSpeed: the optimizer step sits where the engine's step after every backward cannot follow it (one branch of several, after an inner loop of backwards): left unchanged"),
    "MIG129": (Severity.WARNING, "DeepSpeed: the training step is not one torch optimizer stepped after the backward (two optimizers over one model, one built again during training, parameters updated by hand, the script's own class stepping it with clipping or accumulation): left unchanged"),
    "MIG130": (Severity.NOTE, "DeepSpeed: the script never moves the model to a device, so DeepSpeed is kept on the CPU with it and its batches (DS_ACCELERATOR=cpu, gloo): the engine would otherwise move the model to the GPU; move the model and its batches to a GPU to train there"),
    "MIG131": (Severity.WARNING, "DeepSpeed: the script moves the model to a device only under a condition (or moves one model and not another); where it does not, on a GPU host, deepspeed.initialize still moves the model to the GPU while the batches stay on the CPU"),
    "MIG132": (Severity.NOTE, "a module of the script's own project is edited with it (the training step, a loader or a write lives there); the message names the entry points of its folder that import it"),
    "MIG134": (Severity.NOTE, "a module named on its own was converted through the one entry point of its folder that imports it: that script's result (and the modules it edits) stands for it"),
    "MIG135": (Severity.WARNING, "a library module of the project that the script imports was not read with it (it binds a top-level name the script or another module binds too): what runs there is not converted"),
    "MIG137": (Severity.NOTE, "a module of the script's project was not converted with it: its own `__main__` block runs what the conversion would edit there"),
    "MIG136": (Severity.NOTE, "the model makes sparse gradients (an embedding with sparse=True), which NCCL cannot all-reduce: the process group is gloo on a GPU host too"),
    "MIG133": (Severity.WARNING, "a module of the script's project that the conversion would edit is imported by other entry points of its folder too: left unchanged"),
    "MIG900": (Severity.ERROR, "the file could not be read, parsed or written (message says why); nothing was written"),
    "MIG901": (Severity.ERROR, "internal error: the rewritten file did not compile or read a name before binding it; the file is left untouched"),
}


# each target's own codes, declared by the registry (migrate.targets) as it is built: this module
# never looks the registry up, so every layer may import it
_DECLARED: dict[str, tuple[Severity, str]] = {}


def declare(codes: Mapping[str, tuple[Severity, str]]) -> None:
    """Add a target's own codes (a code is declared once, by one of them: again only with the same meaning)."""
    for code, meaning in codes.items():
        assert code not in CODES and _DECLARED.get(code, meaning) == meaning, f"{code} is declared twice"
        _DECLARED[code] = meaning


def all_codes() -> dict[str, tuple[Severity, str]]:
    """The shared codes and every declared target's own."""
    return {**CODES, **_DECLARED}


def finding(code: str, message: str, line: int = 0, col: int = 0) -> Finding:
    """A Finding with the severity its code always has."""
    severity, _ = CODES[code] if code in CODES else _DECLARED[code]
    return Finding(code=code, severity=severity, message=message, line=line, col=col)
