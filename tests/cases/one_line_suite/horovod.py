# A print on a one-line `except:` body, next to an assignment: the body opens into a block and
# only the print moves to rank 0.
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset
import horovod.torch as hvd
from torch.utils.data.distributed import DistributedSampler

hvd.init()
local_rank = hvd.local_rank()
if torch.cuda.is_available():
    torch.cuda.set_device(local_rank)

model = nn.Linear(4, 1)
hvd.broadcast_parameters(model.state_dict(), root_rank=0)  # every rank starts from rank 0's weights
optimizer = torch.optim.SGD(model.parameters(), lr=0.1 * hvd.size())
optimizer = hvd.DistributedOptimizer(optimizer, named_parameters=model.named_parameters())
train_dataset = TensorDataset(torch.randn(32, 4), torch.randn(32, 1))
loader = DataLoader(train_dataset, batch_size=8, sampler=DistributedSampler(train_dataset, num_replicas=hvd.size(), rank=hvd.rank(), shuffle=True))
try: import matplotlib; CAN_PLOT = True
except ImportError:
    CAN_PLOT = False
    if hvd.rank() == 0:
        print("matplotlib is missing: no plots")

for epoch in range(2):
    loader.sampler.set_epoch(epoch)
    for x, y in loader:
        loss = nn.functional.mse_loss(model(x), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    if hvd.rank() == 0:
        print(f"epoch {epoch}: loss {loss.item():.4f}")
hvd.barrier()  # no rank exits while rank 0 still writes its files
hvd.shutdown()
