"""DeepSpeed's names shared by its steps and its target, kept light (no libcst) so the registry can
import them: the config file's default name, and the runtime of a script that keeps its model on the CPU."""

from __future__ import annotations

from migrate.runtime import torch_distributed

CONFIG_NAME = "ds_config.json"

# a script that keeps its model on the CPU keeps DeepSpeed there too (DS_ACCELERATOR=cpu): gloo
# everywhere (migrate.steps.deepspeed_engine.deepspeed_device chooses this one)
DEEPSPEED_ON_CPU = torch_distributed("the deepspeed launcher", '{deepspeed}.init_distributed(dist_backend="gloo")',
                                     modules=("deepspeed",))
