import torch
import torch.nn as nn
import horovod.torch as hvd

class Agent(nn.Module):
    def __init__(self):
        super().__init__()
        self.critic = nn.Linear(4, 1)
        self.actor = nn.Linear(4, 2)

    def get_value(self, x):
        return self.critic(x)

hvd.init()
local_rank = hvd.local_rank()
if torch.cuda.is_available():
    torch.cuda.set_device(local_rank)

agent = Agent()
optimizer = torch.optim.Adam(agent.parameters(), lr=3e-4)
optimizer = hvd.DistributedOptimizer(optimizer, named_parameters=agent.named_parameters())
hvd.broadcast_parameters(agent.state_dict(), root_rank=0)  # every rank starts from rank 0's weights
step = 0
while step < 1000:
    obs = torch.randn(8, 4)
    value = agent.get_value(obs)
    loss = value.pow(2).mean()
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    step += 1
    if step % 100 == 0 and hvd.rank() == 0:
        print("step", step, loss.item())
if hvd.rank() == 0:
    torch.save(agent.state_dict(), "agent.pt")
hvd.barrier()  # no rank exits while rank 0 still writes its files
hvd.shutdown()
