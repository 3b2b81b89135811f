"""What a script asks of torch.cuda under the mode (two pretend GPUs)."""
import torch
from torch import nn

assert torch.cuda.is_available() and torch.cuda.device_count() == 2
torch.cuda.set_device(1)
assert torch.cuda.current_device() == 1 and torch.zeros(2, device="cuda").device == torch.device("cuda", 1)
assert torch.ones(2).cuda().get_device() == 1 and torch.ones(2).to(torch.device("cuda")).is_cuda
with torch.cuda.device(0):
    assert torch.empty(1, device="cuda").device.index == 0
layer = nn.Linear(3, 3).cuda()
assert layer.weight.device.index == 1 and layer.bias.is_cuda
back = layer.cpu()
assert not back.weight.is_cuda and back.weight.device.type == "cpu"
layer.to("cuda:0")
assert layer.weight.device == torch.device("cuda", 0)
assert torch.cuda.memory_allocated() == 0 and torch.cuda.max_memory_reserved() == 0
torch.cuda.empty_cache()
torch.cuda.manual_seed_all(0)
with torch.cuda.stream(torch.cuda.Stream()):
    event = torch.cuda.Event(enable_timing=True)
    event.record()
torch.cuda.synchronize()
x = torch.randn(4, 3, device="cuda:0")
assert layer(x).is_cuda and layer(x).sum().item() == layer(x).sum().item()
print("ok", torch.cuda.get_device_name(0))
assert torch.device(1) == torch.device("cuda", 1)
assert x.type() == "torch.cuda.FloatTensor" and not x.type(torch.FloatTensor).is_cuda
assert torch.ones(2).type(torch.cuda.LongTensor).is_cuda and x.type(torch.float16).is_cuda
print("types ok")
