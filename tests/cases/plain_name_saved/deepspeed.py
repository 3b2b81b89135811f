"""The network is built under one name and trained under another; checkpoints save the first name."""
import json
import os
import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset
import deepspeed
from torch.utils.data.distributed import DistributedSampler
import torch.distributed as dist


def main():
    # the deepspeed launcher sets these; plain `python train.py` runs as a single process (port 0: any free one)
    for key, value in dict(RANK="0", LOCAL_RANK="0", WORLD_SIZE="1", MASTER_ADDR="127.0.0.1", MASTER_PORT="0").items():
        os.environ.setdefault(key, value)
    local_rank = int(os.environ["LOCAL_RANK"])
    if torch.cuda.is_available():
        torch.cuda.set_device(local_rank)
    deepspeed.init_distributed(dist_backend="nccl" if torch.cuda.is_available() else "gloo")
    device = torch.device(f"cuda:{local_rank}" if torch.cuda.is_available() else "cpu")

    detector = nn.Sequential(nn.Conv1d(3, 8, 3, padding=1), nn.ReLU(), nn.Flatten(), nn.Linear(8 * 20, 4))
    net = detector
    if torch.cuda.is_available():
        net = detector.to(device)
    optimizer = torch.optim.SGD(net.parameters(), lr=1e-3, momentum=0.9)

    # DeepSpeed reads its settings from ds_config.json
    with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "ds_config.json")) as config_file:
        ds_config = json.load(config_file)
    net, optimizer, _, _ = deepspeed.initialize(model=net, optimizer=optimizer, config=ds_config)
    train_dataset = TensorDataset(torch.randn(160, 3, 20), torch.randn(160, 4))
    loader = DataLoader(train_dataset, batch_size=8, sampler=DistributedSampler(train_dataset, shuffle=True))
    for iteration, (signals, boxes) in enumerate(loader):
        loss = nn.functional.smooth_l1_loss(net(signals), boxes)
        net.backward(loss)
        net.step()
        if iteration % 10 == 0:
            with deepspeed.zero.GatheredParameters(list(detector.parameters())):  # ZeRO-3 shards the weights: every rank gathers
                detector_state = {name: tensor.detach().cpu().clone() for name, tensor in detector.state_dict().items()}
            if dist.get_rank() == 0:
                torch.save(detector_state, f"detector_{iteration}.pth")
    with deepspeed.zero.GatheredParameters(list(detector.parameters())):  # ZeRO-3 shards the weights: every rank gathers
        detector_state = {name: tensor.detach().cpu().clone() for name, tensor in detector.state_dict().items()}
    if dist.get_rank() == 0:
        torch.save(detector_state, "detector_final.pth")
    dist.barrier()  # no rank exits while rank 0 still writes its files
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
