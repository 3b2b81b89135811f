# main() parses the command line, then returns what training returns: the group must outlive it.
import argparse
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset
import horovod.torch as hvd
from torch.utils.data.distributed import DistributedSampler


def train(args):
    model = nn.Linear(4, 1)
    hvd.broadcast_parameters(model.state_dict(), root_rank=0)  # every rank starts from rank 0's weights
    opt = torch.optim.SGD(model.parameters(), lr=0.1 * hvd.size())
    opt = hvd.DistributedOptimizer(opt, named_parameters=model.named_parameters())
    train_dataset = TensorDataset(torch.randn(32, 4), torch.randn(32, 1))
    loader = DataLoader(train_dataset, batch_size=8, sampler=DistributedSampler(train_dataset, num_replicas=hvd.size(), rank=hvd.rank(), shuffle=True))
    for epoch in range(args.epochs):
        loader.sampler.set_epoch(epoch)
        for x, y in loader:
            loss = nn.functional.mse_loss(model(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
    if hvd.rank() == 0:
        print("done")
    return loss.item()


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--epochs", type=int, default=2)
    args = parser.parse_args()

    hvd.init()
    local_rank = hvd.local_rank()
    if torch.cuda.is_available():
        torch.cuda.set_device(local_rank)
    result = train(args)
    hvd.barrier()  # no rank exits while rank 0 still writes its files
    hvd.shutdown()
    return result


if __name__ == "__main__":
    main()
