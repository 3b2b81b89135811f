import torch
import torch.nn as nn

class Agent(nn.Module):
    def __init__(self):
        super().__init__()
        self.critic = nn.Linear(4, 1)
        self.actor = nn.Linear(4, 2)

    def get_value(self, x):
        return self.critic(x)

agent = Agent()
optimizer = torch.optim.Adam(agent.parameters(), lr=3e-4)
step = 0
while step < 1000:
    obs = torch.randn(8, 4)
    value = agent.get_value(obs)
    loss = value.pow(2).mean()
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    step += 1
    if step % 100 == 0:
        print("step", step, loss.item())
torch.save(agent.state_dict(), "agent.pt")
