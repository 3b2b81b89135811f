"""Fine-tuning with a slower backbone: two parameter groups, each with its own learning rate."""

import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset
import horovod.torch as hvd
from torch.utils.data.distributed import DistributedSampler

BASE_LR = 0.05


def build_model():
    backbone = nn.Sequential(nn.Linear(8, 16), nn.ReLU())
    head = nn.Linear(16, 3)
    return nn.Sequential(backbone, head)


def main():
    hvd.init()
    local_rank = hvd.local_rank()
    if torch.cuda.is_available():
        torch.cuda.set_device(local_rank)

    model = build_model()
    hvd.broadcast_parameters(model.state_dict(), root_rank=0)  # every rank starts from rank 0's weights
    data = TensorDataset(torch.randn(96, 8), torch.randint(0, 3, (96,)))
    loader = DataLoader(data, batch_size=12, sampler=DistributedSampler(data, num_replicas=hvd.size(), rank=hvd.rank(), shuffle=True))
    optimizer = torch.optim.SGD(
        [
            {"params": model[0].parameters(), "lr": BASE_LR * 0.1 * hvd.size()},
            {"params": model[1].parameters(), "lr": BASE_LR * hvd.size()},
        ],
        lr=BASE_LR,
        momentum=0.9,
    )
    optimizer = hvd.DistributedOptimizer(optimizer)
    scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=2, gamma=0.5)
    for epoch in range(4):
        loader.sampler.set_epoch(epoch)
        for features, labels in loader:
            optimizer.zero_grad()
            loss = nn.functional.cross_entropy(model(features), labels)
            loss.backward()
            optimizer.step()
        scheduler.step()
        if hvd.rank() == 0:
            print(f"epoch {epoch} lr {scheduler.get_last_lr()}")
    hvd.barrier()  # no rank exits while rank 0 still writes its files
    hvd.shutdown()


if __name__ == "__main__":
    main()
