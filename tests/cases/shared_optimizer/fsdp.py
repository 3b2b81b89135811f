"""An autoencoder whose encoder and decoder are two modules trained by one optimizer."""
import argparse
import os

import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset
import torch.distributed as dist
from torch.distributed.fsdp import fully_shard
from torch.utils.data.distributed import DistributedSampler
from torch.distributed.checkpoint.state_dict import get_model_state_dict, StateDictOptions


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--batch-size", type=int, default=32)
    args = parser.parse_args()

    # torchrun sets these; plain `python train.py` runs as a single process (port 0: any free one)
    for key, value in dict(RANK="0", LOCAL_RANK="0", WORLD_SIZE="1", MASTER_ADDR="127.0.0.1", MASTER_PORT="0").items():
        os.environ.setdefault(key, value)
    local_rank = int(os.environ["LOCAL_RANK"])
    if torch.cuda.is_available():
        torch.cuda.set_device(local_rank)
    dist.init_process_group("cpu:gloo,cuda:nccl" if torch.cuda.is_available() else "gloo")

    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    signals = TensorDataset(torch.randn(1024, 16))
    loader = DataLoader(signals, batch_size=args.batch_size, sampler=DistributedSampler(signals, shuffle=True))

    encoder = nn.Sequential(nn.Linear(16, 8), nn.Tanh(), nn.Linear(8, 4)).to(device)
    fully_shard(encoder)
    decoder = nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 16)).to(device)
    fully_shard(decoder)
    optimizer = torch.optim.Adam(list(encoder.parameters()) + list(decoder.parameters()), lr=1e-3)

    for epoch in range(args.epochs):
        loader.sampler.set_epoch(epoch)
        for (signal,) in loader:
            signal = signal.to(device)
            optimizer.zero_grad()
            loss = nn.functional.mse_loss(decoder(encoder(signal)), signal)
            loss.backward()
            optimizer.step()
        if dist.get_rank() == 0:
            print(f"epoch {epoch} reconstruction {loss.item():.4f}")

    decoder_state = get_model_state_dict(decoder, options=StateDictOptions(full_state_dict=True, cpu_offload=True))  # every rank gathers; rank 0 gets the full weights
    encoder_state = get_model_state_dict(encoder, options=StateDictOptions(full_state_dict=True, cpu_offload=True))  # every rank gathers; rank 0 gets the full weights
    if dist.get_rank() == 0:
        torch.save({"encoder": encoder_state, "decoder": decoder_state}, "autoencoder.pt")
    dist.barrier()  # no rank exits while rank 0 still writes its files
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
