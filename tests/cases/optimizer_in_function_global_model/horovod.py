"""The model is a module-level name; the training function builds the optimizer and reads the model as a global."""
import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset
import horovod.torch as hvd
from torch.utils.data.distributed import DistributedSampler


def fit(epochs, learning_rate):
    optimizer = torch.optim.SGD(model.parameters(), lr=learning_rate * hvd.size())
    optimizer = hvd.DistributedOptimizer(optimizer, named_parameters=model.named_parameters())
    for epoch in range(epochs):
        loader.sampler.set_epoch(epoch)
        for features, targets in loader:
            optimizer.zero_grad()
            loss = nn.functional.mse_loss(model(features), targets)
            loss.backward()
            optimizer.step()


if __name__ == "__main__":
    hvd.init()
    local_rank = hvd.local_rank()
    if torch.cuda.is_available():
        torch.cuda.set_device(local_rank)
    train_dataset = TensorDataset(torch.randn(128, 5), torch.randn(128, 1))
    loader = DataLoader(train_dataset, batch_size=16, sampler=DistributedSampler(train_dataset, num_replicas=hvd.size(), rank=hvd.rank(), shuffle=True))
    model = nn.Linear(5, 1)
    hvd.broadcast_parameters(model.state_dict(), root_rank=0)  # every rank starts from rank 0's weights
    fit(3, 0.05)
    if hvd.rank() == 0:
        torch.save(model.state_dict(), "linear.pt")
    hvd.barrier()  # no rank exits while rank 0 still writes its files
    hvd.shutdown()
