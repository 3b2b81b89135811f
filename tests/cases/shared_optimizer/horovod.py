"""An autoencoder whose encoder and decoder are two modules trained by one optimizer."""
import argparse
import itertools

import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset
import horovod.torch as hvd
from torch.utils.data.distributed import DistributedSampler


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--batch-size", type=int, default=32)
    args = parser.parse_args()

    hvd.init()
    local_rank = hvd.local_rank()
    if torch.cuda.is_available():
        torch.cuda.set_device(local_rank)

    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    signals = TensorDataset(torch.randn(1024, 16))
    loader = DataLoader(signals, batch_size=args.batch_size, sampler=DistributedSampler(signals, num_replicas=hvd.size(), rank=hvd.rank(), shuffle=True))

    encoder = nn.Sequential(nn.Linear(16, 8), nn.Tanh(), nn.Linear(8, 4)).to(device)
    hvd.broadcast_parameters(encoder.state_dict(), root_rank=0)  # every rank starts from rank 0's weights
    decoder = nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 16)).to(device)
    hvd.broadcast_parameters(decoder.state_dict(), root_rank=0)  # every rank starts from rank 0's weights
    optimizer = torch.optim.Adam(list(encoder.parameters()) + list(decoder.parameters()), lr=1e-3 * hvd.size())
    optimizer = hvd.DistributedOptimizer(optimizer, named_parameters=itertools.chain(encoder.named_parameters(prefix="encoder"), decoder.named_parameters(prefix="decoder")))

    for epoch in range(args.epochs):
        loader.sampler.set_epoch(epoch)
        for (signal,) in loader:
            signal = signal.to(device)
            optimizer.zero_grad()
            loss = nn.functional.mse_loss(decoder(encoder(signal)), signal)
            loss.backward()
            optimizer.step()
        if hvd.rank() == 0:
            print(f"epoch {epoch} reconstruction {loss.item():.4f}")

    if hvd.rank() == 0:
        torch.save({"encoder": encoder.state_dict(), "decoder": decoder.state_dict()}, "autoencoder.pt")
    hvd.barrier()  # no rank exits while rank 0 still writes its files
    hvd.shutdown()


if __name__ == "__main__":
    main()
