"""An NCCL group: all_reduce of a GPU tensor and all_gather_object work; with `cpu` as argument,
an all_reduce of a CPU tensor is attempted too."""
import os
import sys

import torch
import torch.distributed as dist

dist.init_process_group("nccl")
torch.cuda.set_device(int(os.environ["LOCAL_RANK"]))
total = torch.full((3,), float(dist.get_rank() + 1), device="cuda")
dist.all_reduce(total)
assert total.tolist() == [3.0, 3.0, 3.0] and total.device == torch.device("cuda", dist.get_rank())
if sys.argv[1:] == ["cpu"]:
    count = torch.tensor([1.0, 2.0])
    dist.all_reduce(count)
dist.barrier()
ranks = [None, None]
dist.all_gather_object(ranks, {"rank": dist.get_rank()})  # torch moves the bytes to the GPU itself
assert ranks == [{"rank": 0}, {"rank": 1}], ranks
os.write(1, f"reduced {total.tolist()}\n".encode())  # one write: the ranks share a pipe
dist.destroy_process_group()
