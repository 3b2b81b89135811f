import argparse
import os

import torch
import torch.nn.functional as F
from torch.utils.data import DataLoader, TensorDataset

from nets import Decoder
import torch.distributed as dist
from torch.distributed.fsdp import fully_shard, register_fsdp_forward_method
from nets import DecoderLayer
from torch.utils.data.distributed import DistributedSampler
from torch.distributed.checkpoint.state_dict import get_model_state_dict, StateDictOptions

VOCABULARY = 50


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--batch-size", type=int, default=16)
    args = parser.parse_args()

    # torchrun sets these; plain `python train.py` runs as a single process (port 0: any free one)
    for key, value in dict(RANK="0", LOCAL_RANK="0", WORLD_SIZE="1", MASTER_ADDR="127.0.0.1", MASTER_PORT="0").items():
        os.environ.setdefault(key, value)
    local_rank = int(os.environ["LOCAL_RANK"])
    if torch.cuda.is_available():
        torch.cuda.set_device(local_rank)
    dist.init_process_group("cpu:gloo,cuda:nccl" if torch.cuda.is_available() else "gloo")

    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    tokens = torch.randint(0, VOCABULARY, (512, 17))
    train_dataset = TensorDataset(tokens[:, :-1], tokens[:, 1:])
    loader = DataLoader(train_dataset, batch_size=args.batch_size, sampler=DistributedSampler(train_dataset, shuffle=True))

    model = Decoder(VOCABULARY).to(device)
    for submodule in model.modules():  # each block's weights are gathered only while it runs
        if isinstance(submodule, DecoderLayer):
            fully_shard(submodule)
    fully_shard(model)
    register_fsdp_forward_method(model, "complete")  # gathers the weights around it, as around forward()
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-4)

    for epoch in range(args.epochs):
        loader.sampler.set_epoch(epoch)
        for inputs, targets in loader:
            inputs, targets = inputs.to(device), targets.to(device)
            logits = model(inputs)
            loss = F.cross_entropy(logits.reshape(-1, VOCABULARY), targets.reshape(-1))
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        if dist.get_rank() == 0:
            print(f"epoch {epoch} loss {loss.item():.3f}")

    model.eval()
    message = model.complete(tokens[:1, :4].to(device), steps=8)  # computed on every rank: it may run the model
    if dist.get_rank() == 0:
        print(message)
    model_state = get_model_state_dict(model, options=StateDictOptions(full_state_dict=True, cpu_offload=True))  # every rank gathers; rank 0 gets the full weights
    if dist.get_rank() == 0:
        torch.save(model_state, "decoder.pt")
    dist.barrier()  # no rank exits while rank 0 still writes its files
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
