"""`migrate check`: a linter for scripts that are already distributed (DDP, FSDP, DeepSpeed,
Horovod, DataParallel). It converts nothing and writes nothing (but `--fix`, fix.py: DC202, DC203
and DC801 repaired in the text, written through migrate.writing): it reads each script once
(migrate.sources), indexes it (migrate.analysis.index) and runs every rule of the table in
migrate.check.rules over it. Each finding is a `Violation` with a stable `DCnnn` code of its own
family (the MIG codes mean conversion findings). runner.py reads the files and filters the codes;
facts.py and processes.py hold what several rules share (the frameworks a script calls, the names
its wrappers are bound to, which statements run on no rank: in the process that spawns the ranks, or
in a function nothing calls; which run on rank 0 only is migrate.analysis.guards'); rules_*.py hold the rules (rules_nccl.py:
NCCL asked for CPU tensors, DC802).
"""

from __future__ import annotations

from migrate.check.runner import Violation, check_source

__all__ = ["Violation", "check_source"]
