"""A part of the model frozen inside the function that trains it, after the wrap (fine-tuning a head:
`for p in model[0].parameters(): p.requires_grad_(False)` in `finetune_head(model, ...)`): DDP
registered those parameters when it was built and waits for their gradients in every step, so the
first step failed ("Expected to have finished reduction in the prior iteration"). Found reading the
conversion of a project (issue 27) as a reviewer; the same shape in one file is tested here."""

from __future__ import annotations

from migrate import migrate_source

SCRIPT = '''import torch


def fit(model, batches, optimizer):
    for inputs, targets in batches:
        optimizer.zero_grad()
        torch.nn.functional.mse_loss(model(inputs), targets).backward()
        optimizer.step()


def finetune_head(model, batches):
    for parameter in model[0].parameters():
        parameter.requires_grad_(False)
    fit(model, batches, torch.optim.SGD(model[-1].parameters(), lr=0.05))


def main():
    model = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.Tanh(), torch.nn.Linear(8, 1))
    finetune_head(model, [(torch.randn(4, 8), torch.randn(4, 1))])
    torch.save(model.state_dict(), "tuned.pt")


if __name__ == "__main__":
    main()
'''


def test_a_part_frozen_in_the_training_function_makes_ddp_find_unused_parameters() -> None:
    result = migrate_source(SCRIPT, "ddp")
    assert "    model = DDP(model, find_unused_parameters=True)\n" in result.new
    [mig501] = [f for f in result.findings if f.code == "MIG501"]
    assert "(a part of `model` has its gradients switched off during training, after the wrap (line 12))" in mig501.message


def test_the_whole_model_frozen_for_a_step_is_still_no_gap() -> None:
    whole = SCRIPT.replace("model[0].parameters()", "model.parameters()")
    assert "find_unused_parameters" not in migrate_source(whole, "ddp").new


LOSS_WITH_TAIL = '''import torch


class TailLoss(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.tail = torch.nn.Parameter(torch.zeros(4))

    def forward(self, hidden, head=None):
        weights = self.tail if head is None else torch.cat([head, self.tail])
        return (hidden[..., : weights.numel()] * weights).sum()


def main():
    model = torch.nn.Linear(4, 4)
    criterion = TailLoss()
    optimizer = torch.optim.SGD(list(model.parameters()) + list(criterion.parameters()), lr=0.1)
    for step in range(3):
        loss = criterion(model(torch.randn(2, 4)))
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()


if __name__ == "__main__":
    main()
'''


def test_a_part_read_in_both_arms_of_a_conditional_expression_is_no_gap() -> None:
    # `self.tail if head is None else torch.cat([head, self.tail])` reads the part whichever arm runs
    result = migrate_source(LOSS_WITH_TAIL, "ddp")
    assert "criterion = DDP(criterion" in result.new or "DDP(" in result.new
    assert "find_unused_parameters" not in result.new
    assert not [f for f in result.findings if f.code == "MIG501"]
