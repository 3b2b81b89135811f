"""An autoencoder whose encoder and decoder are two modules trained by one optimizer."""
import argparse
import json
import os

import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset
import deepspeed
from torch.utils.data.distributed import DistributedSampler
import torch.distributed as dist


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--local_rank", "--local-rank", type=int, default=-1, help="set by the deepspeed launcher")
    args = parser.parse_args()

    # the deepspeed launcher sets these; plain `python train.py` runs as a single process (port 0: any free one)
    for key, value in dict(RANK="0", LOCAL_RANK="0", WORLD_SIZE="1", MASTER_ADDR="127.0.0.1", MASTER_PORT="0").items():
        os.environ.setdefault(key, value)
    local_rank = int(os.environ["LOCAL_RANK"])
    if torch.cuda.is_available():
        torch.cuda.set_device(local_rank)
    deepspeed.init_distributed(dist_backend="nccl" if torch.cuda.is_available() else "gloo")

    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    signals = TensorDataset(torch.randn(1024, 16))
    loader = DataLoader(signals, batch_size=args.batch_size, sampler=DistributedSampler(signals, shuffle=True))

    encoder = nn.Sequential(nn.Linear(16, 8), nn.Tanh(), nn.Linear(8, 4)).to(device)
    decoder = nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 16)).to(device)
    optimizer = torch.optim.Adam(list(encoder.parameters()) + list(decoder.parameters()), lr=1e-3)

    # DeepSpeed reads its settings from ds_config.json; the values this script computes itself
    # overwrite the file's, so the two never disagree
    with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "ds_config.json")) as config_file:
        ds_config = json.load(config_file)
    ds_config["train_micro_batch_size_per_gpu"] = args.batch_size
    # one engine over `encoder` and `decoder`, which `optimizer` trains together; the script still
    # calls each module itself
    encoder_decoder = torch.nn.ModuleDict({"encoder": encoder, "decoder": decoder})
    encoder_decoder, optimizer, _, _ = deepspeed.initialize(model=encoder_decoder, optimizer=optimizer, config=ds_config)

    for epoch in range(args.epochs):
        loader.sampler.set_epoch(epoch)
        for (signal,) in loader:
            signal = signal.to(device)
            loss = nn.functional.mse_loss(decoder(encoder(signal)), signal)
            encoder_decoder.backward(loss)
            encoder_decoder.step()
        if dist.get_rank() == 0:
            print(f"epoch {epoch} reconstruction {loss.item():.4f}")

    with deepspeed.zero.GatheredParameters(list(encoder.parameters())):  # ZeRO-3 shards the weights: every rank gathers
        encoder_state = {name: tensor.detach().cpu().clone() for name, tensor in encoder.state_dict().items()}
    with deepspeed.zero.GatheredParameters(list(decoder.parameters())):  # ZeRO-3 shards the weights: every rank gathers
        decoder_state = {name: tensor.detach().cpu().clone() for name, tensor in decoder.state_dict().items()}
    if dist.get_rank() == 0:
        torch.save({"encoder": encoder_state, "decoder": decoder_state}, "autoencoder.pt")
    dist.barrier()  # no rank exits while rank 0 still writes its files
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
