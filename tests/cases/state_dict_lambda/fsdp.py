"""A classifier whose weights are read through a lambda, saved after every epoch and kept when best."""
import os
import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset
import torch.distributed as dist
from torch.distributed.fsdp import fully_shard
from torch.distributed.device_mesh import init_device_mesh
from torch.utils.data.distributed import DistributedSampler
from torch.distributed.checkpoint.state_dict import get_model_state_dict, StateDictOptions


class Classifier(nn.Module):
    def __init__(self):
        super().__init__()
        self.hidden = nn.Linear(6, 12)
        self.out = nn.Linear(12, 3)

    def forward(self, x):
        return self.out(torch.tanh(self.hidden(x)))


def main():
    # torchrun sets these; plain `python train.py` runs as a single process (port 0: any free one)
    for key, value in dict(RANK="0", LOCAL_RANK="0", WORLD_SIZE="1", MASTER_ADDR="127.0.0.1", MASTER_PORT="0").items():
        os.environ.setdefault(key, value)
    local_rank = int(os.environ["LOCAL_RANK"])
    if torch.cuda.is_available():
        torch.cuda.set_device(local_rank)
    dist.init_process_group("cpu:gloo,cuda:nccl" if torch.cuda.is_available() else "gloo")

    torch.manual_seed(0)
    samples = TensorDataset(torch.randn(96, 6), torch.randint(0, 3, (96,)))
    loader = DataLoader(samples, batch_size=12, sampler=DistributedSampler(samples, shuffle=True))
    net = Classifier()
    # sharded on the device the script keeps the model on (FSDP2's default is the GPU, when there is one)
    device_mesh = init_device_mesh(next(net.parameters()).device.type, (dist.get_world_size(),))
    fully_shard(net, mesh=device_mesh)
    opt = torch.optim.Adam(net.parameters(), lr=1e-2)
    current_weights = lambda: get_model_state_dict(net, options=StateDictOptions(full_state_dict=True, cpu_offload=True))
    for epoch in range(3):
        loader.sampler.set_epoch(epoch)
        for inputs, labels in loader:
            opt.zero_grad()
            loss = nn.functional.cross_entropy(net(inputs), labels)
            loss.backward()
            opt.step()
        current_weights_state = current_weights()  # every rank gathers; rank 0 gets the full weights
        if dist.get_rank() == 0:
            torch.save(current_weights_state, f"classifier_epoch{epoch}.pt")
    final = current_weights()
    if dist.get_rank() == 0:
        torch.save(final, "classifier_final.pt")
    dist.barrier()  # no rank exits while rank 0 still writes its files
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
