"""`device="cuda"` in a factory gives a GPU tensor; adding a CPU tensor to it is refused."""
import torch

mask = torch.ones(5, device="cuda")
assert mask.is_cuda and mask.get_device() == 0 and (mask * 2).device.type == "cuda"
assert torch.zeros_like(mask).is_cuda and not mask.cpu().is_cuda
counts = torch.arange(5)
total = mask + counts
