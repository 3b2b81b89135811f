"""The step sequence every target with a process group shares, written once: setup, the local
rank's device, the DistributedSampler and the same random split, output once (rank 0), files every
rank would touch, a plateau scheduler's metric, `torch.load`'s map_location, and teardown. Each
target fills the places between them with its own steps (its refusals, its wrap, what it adds
after the data is sharded, its learning-rate rule)."""

from __future__ import annotations

from collections.abc import Sequence

from migrate.steps.base import Step
from migrate.steps.distributed_sampler import distributed_sampler
from migrate.steps.init_process_group import setup, teardown
from migrate.steps.load_map_location import load_map_location
from migrate.steps.local_rank_device import local_rank_device
from migrate.steps.rank_zero import rank_zero
from migrate.steps.same_split import same_split
from migrate.steps.scheduler_checks import plateau_metric
from migrate.steps.shared_files import shared_files


def process_group_steps(*, before_setup: Sequence[Step], wrap: Sequence[Step], after_data: Sequence[Step],
                        before_teardown: Sequence[Step] = (), after_setup: Sequence[Step] = (),
                        after_teardown: Sequence[Step] = ()) -> tuple[Step, ...]:
    """The shared steps in their order, with the target's own in the places named:
    `before_setup` (refusals, decisions setup depends on), `after_setup`, `wrap` (after the device
    is set: the wrapper, engine or broadcast, and what follows it), `after_data` (after the loaders
    are sharded: accumulation, epoch figures), `before_teardown` (learning-rate scaling),
    `after_teardown` (notes once the file is converted)."""
    return (*before_setup, setup, *after_setup, local_rank_device, *wrap, distributed_sampler, same_split,
            *after_data, rank_zero, shared_files, plateau_metric, load_map_location, *before_teardown, teardown,
            *after_teardown)
