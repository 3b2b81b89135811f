import torch
import torch.nn as nn
import horovod.torch as hvd


class PolicyNet(nn.Module):
    def __init__(self, obs_dim=4, actions=2):
        super().__init__()
        self.body = nn.Sequential(nn.Linear(obs_dim, 32), nn.Tanh())
        self.logits = nn.Linear(32, actions)
        self.value = nn.Linear(32, 1)

    def forward(self, obs):
        return self.logits(self.body(obs))

    def policy_and_value(self, obs):
        hidden = self.body(obs)
        return torch.distributions.Categorical(logits=self.logits(hidden)), self.value(hidden)


class Agent:
    def __init__(self):
        self.net = PolicyNet()

    def act(self, obs):
        dist, value = self.net.policy_and_value(obs)
        action = dist.sample()
        return action, dist.log_prob(action), value.squeeze(-1)

hvd.init()
local_rank = hvd.local_rank()
if torch.cuda.is_available():
    torch.cuda.set_device(local_rank)


agent = Agent()
optimizer = torch.optim.Adam(agent.net.parameters(), lr=3e-4)
optimizer = hvd.DistributedOptimizer(optimizer, named_parameters=agent.net.named_parameters())
hvd.broadcast_parameters(agent.net.state_dict(), root_rank=0)  # every rank starts from rank 0's weights

for update in range(200):
    obs = torch.randn(16, 4)
    action, log_prob, value = agent.act(obs)
    reward = (action == (obs[:, 0] > 0).long()).float()
    advantage = reward - value.detach()
    loss = -(log_prob * advantage).mean() + (reward - value).pow(2).mean()
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    if update % 50 == 0 and hvd.rank() == 0:
        print(f"update {update}: loss {loss.item():.4f}")

if hvd.rank() == 0:
    torch.save(agent.net.state_dict(), "agent.pt")
hvd.barrier()  # no rank exits while rank 0 still writes its files
hvd.shutdown()
