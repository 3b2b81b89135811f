"""The table of `migrate check` rules: each code, its severity, its one-line description and the
function that finds it. Codes are stable (DC1xx wrappers, DC2xx data, DC3xx Horovod, DC4xx output
per rank, DC5xx collectives, DC6xx sharded and wrapped state, DC7xx DeepSpeed config, DC8xx
the process group: its lifetime and its backend); a code never changes meaning."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

from migrate.check import rules_data, rules_deepspeed, rules_horovod, rules_nccl, rules_ranks, rules_state
from migrate.check.facts import Hit, Script


@dataclass(frozen=True)
class Rule:
    code: str
    severity: str  # "error": the run fails or hangs; "warning": it runs, but trains wrong or wastes
    summary: str
    find: Callable[[Script], Iterable[Hit]]


RULES: tuple[Rule, ...] = (
    Rule("DC101", "warning", "nn.DataParallel: one process for every GPU of one machine; use DistributedDataParallel",
         rules_data.data_parallel),
    Rule("DC201", "warning", "a training DataLoader without a DistributedSampler in a script that sets up a process group",
         rules_data.missing_sampler),
    Rule("DC202", "error", "shuffle=True beside a sampler: DataLoader raises at start-up", rules_data.shuffle_beside_sampler),
    Rule("DC203", "warning", "a shuffling DistributedSampler over several epochs and no set_epoch(epoch)",
         rules_data.set_epoch_missing),
    Rule("DC301", "warning", "Horovod: the learning rate is not scaled by hvd.size()", rules_horovod.lr_not_scaled),
    Rule("DC302", "error", "Horovod: parameters never broadcast (hvd.broadcast_parameters)",
         rules_horovod.parameters_not_broadcast),
    Rule("DC303", "error", "Horovod: optimizer state loaded and not broadcast after (hvd.broadcast_optimizer_state)",
         rules_horovod.optimizer_state_not_broadcast),
    Rule("DC304", "error", "Horovod: an optimizer not wrapped in hvd.DistributedOptimizer", rules_horovod.optimizer_not_wrapped),
    Rule("DC401", "warning", "print or log below ERROR on every rank (not under a rank-0 guard)",
         rules_ranks.output_on_every_rank),
    Rule("DC402", "warning", "torch.save, a saved figure or a file opened for writing on every rank (not under a rank-0 guard)",
         rules_ranks.writes_on_every_rank),
    Rule("DC501", "error", "a collective (barrier, all_reduce, a wrapped model's forward, a state-dict gather, "
         "save_checkpoint) under a rank-0 guard: the job hangs", rules_ranks.collective_on_rank_zero),
    Rule("DC601", "error", "an optimizer built before fully_shard/FSDP over the same model", rules_state.optimizer_before_shard),
    Rule("DC602", "warning", "a wrapped model's state_dict() saved with its `module.` prefix", rules_state.module_prefix_saved),
    Rule("DC701", "error", "DeepSpeed config: train_batch_size cannot equal micro batch x accumulation x world size",
         rules_deepspeed.batch_arithmetic),
    Rule("DC801", "warning", "init_process_group without destroy_process_group", rules_state.process_group_kept),
    Rule("DC802", "error", "NCCL-only process group and a collective on a CPU tensor, or DDP over a model never moved to a GPU",
         rules_nccl.nccl_on_cpu),
)
BY_CODE = {rule.code: rule for rule in RULES}


def rule_table() -> str:
    """`--list-rules`: one line per rule."""
    return "".join(f"{r.code}  {r.severity:<7}  {r.summary}\n" for r in RULES)


def markdown_table() -> str:
    """The README's table of rules, as this table has them."""
    rows = ["| code | severity | what it finds |", "|---|---|---|"]
    rows += [f"| {r.code} | {r.severity} | {r.summary} |" for r in RULES]
    return "\n".join(rows) + "\n"


def chosen(select: Iterable[str], ignore: Iterable[str]) -> tuple[Rule, ...]:
    """The rules `--select` keeps (all when empty) less those `--ignore` drops; prefixes allowed (DC1)."""
    picked = tuple(select)
    dropped = tuple(ignore)
    return tuple(r for r in RULES if (not picked or r.code.startswith(picked)) and not r.code.startswith(dropped))


def unknown_codes(codes: Iterable[str]) -> list[str]:
    """The codes or prefixes that match no rule."""
    return [code for code in codes if not any(r.code.startswith(code) for r in RULES)]
