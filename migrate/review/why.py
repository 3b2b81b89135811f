"""One sentence of why for a changed hunk, read from the lines the conversion wrote.

The converted lines name what they do (`DistributedSampler(...)`, `dist.init_process_group(...)`,
`if dist.get_rank() == 0:`): each pattern below that the new lines match gives its sentence, in
the table's order, so a change that does two things says both. Lines that match none get the
target's framework, so a reviewer always reads a reason.
"""

from __future__ import annotations

import re

REASONS: tuple[tuple[str, str], ...] = (
    (r"init_process_group|hvd\.init\(|deepspeed\.init_distributed",
     "Sets up the process group every rank joins (the launcher gives each its RANK and LOCAL_RANK)."),
    (r"deepspeed\.initialize", "Builds the DeepSpeed engine, which owns the model, the optimizer and the ZeRO stage."),
    (r"fully_shard", "Shards the model's weights, gradients and optimizer state over the ranks (FSDP2)."),
    (r"\bDDP\(|DistributedDataParallel\(", "Wraps the model so each backward averages the gradients over the ranks."),
    (r"DistributedOptimizer", "Wraps the optimizer so Horovod averages the gradients over the ranks."),
    (r"broadcast_parameters|broadcast_optimizer_state", "Starts every rank from rank 0's weights and optimizer state."),
    (r"DataParallel\(", "Runs the model on every GPU of this machine (nn.DataParallel)."),
    (r"DistributedSampler", "Gives each rank its own shard of the training data."),
    (r"\.set_epoch\(", "Shuffles the shards differently each epoch, as the original shuffled its data."),
    (r"no_sync\(", "Skips the gradient all-reduce on the micro-steps that do not step the optimizer."),
    (r"\.synchronize\(\)", "Waits for Horovod's gradient averaging before the gradients are read (clipping, unscaling)."),
    (r"skip_synchronize", "Steps without averaging the gradients a second time (they were averaged above)."),
    (r"\* hvd\.size\(\)", "Scales the learning rate by the number of ranks, as Horovod's recipe does for the larger global batch."),
    (r"DS_ACCELERATOR", "Keeps DeepSpeed on the CPU, where the script keeps its model and batches."),
    (r"set_gradient_accumulation_boundary", "Tells the engine where the script's accumulation window ends, so it steps where the original did."),
    (r"\w\.backward\(\w+\)", "The engine runs the backward and the optimizer step (scaling, clipping and zeroing included)."),
    (r"get_model_state_dict|full_tensor\(|GatheredParameters|StateDictOptions", "Gathers the full weights on every rank, so rank 0 saves or reads a whole model."),
    (r"all_reduce|allreduce", "Reduces the printed figures over every rank, so rank 0 prints what the original did."),
    (r"destroy_process_group|\.barrier\(|\.join\(\)", "Waits for every rank before the end, so none exits while rank 0 still writes."),
    (r"# computed on every rank", "Computes on every rank what may run the model (every rank must take part), "
     "then prints it on rank 0."),
    (r"rank\(\) == 0|RANK\"?, ?\"0\"\) == \"0\"|\.rank\(\) == 0", "Prints and writes files on rank 0 only, once instead of once per rank."),
    (r"map_location", "Loads the checkpoint onto this rank's device."),
    (r"\.module\.", "Reaches the model's own attributes and weights through the wrapper (`.module`)."),
    (r"local_rank|LOCAL_RANK", "Puts each rank on its own device."),
    (r"exist_ok=True", "Lets every rank create the folder without failing on the others."),
    (r"manual_seed", "Makes every rank draw the same split, or its own batches, as the seed requires."),
    (r"^\s*(import|from)\s", "Imports what the changes below use."),
)
IMPORTS = REASONS[-1][1]


def reason(new_lines: list[str], framework: str) -> str:
    """The sentence for a hunk that wrote `new_lines` (empty for a deletion)."""
    written = [line for line in new_lines if line.strip()]
    if written and all(re.match(r"\s*(import|from)\s", line) for line in written):
        return IMPORTS  # only imports: whatever they name, they serve the other changes
    text = "\n".join(line for line in new_lines if not re.match(r"\s*(import|from)\s", line))
    found = [sentence for pattern, sentence in REASONS[:-1] if re.search(pattern, text, re.MULTILINE)]
    if found:
        return " ".join(found)
    if not new_lines:
        return f"Removed for the conversion to {framework}."
    return f"Part of the conversion to {framework}."
