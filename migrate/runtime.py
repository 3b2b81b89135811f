"""How a target's code spells the distributed world it runs in.

Shared steps (rank-0 guards, samplers, barriers, the local rank's device, setup and teardown)
never name a framework's API: they ask the target's Runtime. torch.distributed says
`dist.get_rank()`, Horovod says `hvd.rank()`; the local rank is the variable setup binds, and
before setup (or where that variable is out of sight) the launcher's environment variable.

Messages name what the target does: `advice` rewrites the torch.distributed words that shared
analysis writes (`dist.broadcast_object_list`, "the wrapper copied rank 0's weights") into the
runtime's own; `forward_joins` says whether a forward needs every rank (rank-0 guards ask it).

Spellings are templates: `{m}` is the local name of the runtime's module in the script being
converted (`import torch.distributed as tdist` in the script gives `tdist.get_rank()`); `{os}`,
`{torch}` and each of `modules` are the local names of those modules, `{local_rank}` the
variable setup binds. Context.spell fills them in, importing only what a template uses.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Runtime:
    module: str  # what the spellings' `{m}` names: "torch.distributed"
    alias: str  # its local name when the script does not import it yet: "dist"
    launcher: str  # named in comments and messages: "torchrun"
    rank: str  # this process's global rank
    world_size: str  # the number of processes
    barrier: str  # every process waits here for the others
    setup: str  # statements, after the environment block: bind `local_rank`, start the group
    teardown: str  # statements at the end of the entry point
    environment: tuple[tuple[str, str], ...] = ()  # what the launcher sets, filled in for a plain run
    rank_variable: str = "RANK"  # the launcher's environment: readable before setup and after teardown
    local_rank_variable: str = "LOCAL_RANK"
    local_rank_name: str = "local_rank"  # the variable setup binds
    # the local rank asked of the runtime, for a function of another module of the program (issue 27)
    # that runs after setup; "" where the launcher's variable is always there (torchrun's LOCAL_RANK)
    local_rank_call: str = ""
    sampler_arguments: str = ""  # what DistributedSampler needs beyond (dataset, shuffle=...)
    modules: tuple[str, ...] = ()  # other modules the templates name, as `{last part of the name}`
    # how the advice in messages, written in torch.distributed's words, reads for this runtime
    advice: tuple[tuple[str, str], ...] = ()
    # whether a forward of the trained model may run a collective every rank must join (DDP may
    # broadcast buffers, FSDP and ZeRO-3 gather weights); Horovod's runs none: its all-reduces run
    # in backward and the optimizer's step, its broadcasts where the conversion puts them
    forward_joins: bool = True
    # what takes the place of a removed nn.DataParallel, in messages
    replaces_data_parallel: str = "the distributed wrapper"

    def said(self, template: str) -> str:
        """`template` as a message to the user writes it: modules under their usual names."""
        names = {"m": self.alias, "os": "os", "torch": "torch", "local_rank": self.local_rank_name}
        names.update({module.rsplit(".", 1)[-1]: module for module in self.modules})
        return template.format_map(names)


# torchrun and the deepspeed launcher set these; `python train.py` gets them for one process.
LAUNCHER_ENVIRONMENT = (
    ("RANK", "0"), ("LOCAL_RANK", "0"), ("WORLD_SIZE", "1"), ("MASTER_ADDR", "127.0.0.1"), ("MASTER_PORT", "0"),
)

# torch.distributed's own spellings, shared by the targets whose process group is torch's.
TORCH_RANK = "{m}.get_rank()"
TORCH_WORLD_SIZE = "{m}.get_world_size()"
TORCH_BARRIER = "{m}.barrier()"
TORCH_TEARDOWN = (
    "{m}.barrier()  # no rank exits while rank 0 still writes its files\n"
    "{m}.destroy_process_group()\n"
)


def torch_distributed(launcher: str, init: str, modules: tuple[str, ...] = ()) -> Runtime:
    """A runtime whose process group is torch.distributed's, started by `init` (a statement
    template) after the local rank's GPU is chosen: DDP under torchrun, DeepSpeed under its launcher."""
    setup = (
        'local_rank = int({os}.environ["LOCAL_RANK"])\n'
        "if {torch}.cuda.is_available():\n"
        "    {torch}.cuda.set_device(local_rank)\n"
        f"{init}\n"
    )
    return Runtime(module="torch.distributed", alias="dist", launcher=launcher, rank=TORCH_RANK,
                   world_size=TORCH_WORLD_SIZE, barrier=TORCH_BARRIER, setup=setup, teardown=TORCH_TEARDOWN,
                   environment=LAUNCHER_ENVIRONMENT, modules=modules)
