"""The sentence of why a pull-request reviewer reads for each change: every thing a change does is
said, not only the first (a range that hoists a print, guards it and ends the process group)."""

from __future__ import annotations

from migrate.review.why import IMPORTS, reason

ENDING = [
    "    message = translate('man')  # computed on every rank: it may run the model",
    "    if dist.get_rank() == 0:",
    "        print('man ->', message)",
    "    dist.barrier()  # no rank exits while rank 0 still writes its files",
    "    dist.destroy_process_group()",
]


def test_a_change_that_does_three_things_says_the_three() -> None:
    said = reason(ENDING, "DDP")
    assert "Waits for every rank before the end" in said
    assert "Computes on every rank what may run the model" in said
    assert "Prints and writes files on rank 0 only" in said


def test_imports_alone_say_they_serve_the_other_changes() -> None:
    assert reason(["import torch.distributed as dist"], "DDP") == IMPORTS


def test_an_import_beside_a_wrap_does_not_add_the_import_sentence() -> None:
    assert reason(["from torch.nn.parallel import DistributedDataParallel as DDP", "model = DDP(model)"], "DDP") == \
        "Wraps the model so each backward averages the gradients over the ranks."


def test_lines_no_pattern_knows_still_get_a_reason() -> None:
    assert reason(["x = 1"], "Horovod") == "Part of the conversion to Horovod."


def test_horovod_s_synchronize_and_deepspeed_s_engine_are_said_in_their_own_words() -> None:
    assert reason(["        optimizer.synchronize()"], "Horovod").startswith("Waits for Horovod's gradient averaging")
    horovod_step = reason(["        with optimizer.skip_synchronize():", "            optimizer.step()"], "Horovod")
    assert "engine" not in horovod_step
    assert "The engine runs the backward" in reason(["        model.backward(loss)", "        model.step()"], "DeepSpeed")
