"""Epoch figures where the data is not sharded (MIG101: no DataLoader the conversion can give a
sampler): every rank reads every batch, so each rank's running sum is already the original's; summed
over the ranks it was N times as large (a corpus project's logged loss). It is averaged instead,
counts kept whole, for torch.distributed and Horovod alike."""

from __future__ import annotations

from migrate import migrate_source

SCRIPT = '''import torch


def main():
    model = torch.nn.Linear(4, 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    batches = [(torch.randn(8, 4), torch.randn(8, 1)) for _ in range(5)]
    for epoch in range(2):
        total, seen = 0.0, 0
        for x, y in batches:
            loss = torch.nn.functional.mse_loss(model(x), y)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            total += loss.item()
            seen += 1
        print(f"epoch {epoch}: {total:.4f} over {seen} batches")


if __name__ == "__main__":
    main()
'''


def test_ddp_averages_the_sums_of_data_every_rank_reads() -> None:
    result = migrate_source(SCRIPT, "ddp")
    assert "MIG101" in {f.code for f in result.findings}
    assert "total = figures[0].item() / dist.get_world_size()  # the ranks' mean, every rank read every batch\n" in result.new
    assert "seen = round(figures[1].item() / dist.get_world_size())" in result.new
    [mig007] = [f for f in result.findings if f.code == "MIG007"]
    assert "`total`, `seen` averaged over every rank" in mig007.message
    assert "(the data is not sharded, MIG101: every rank read every batch" in mig007.message


def test_horovod_averages_them_too() -> None:
    new = migrate_source(SCRIPT, "horovod").new
    assert "total = hvd.allreduce(torch.tensor(total), op=hvd.Average).item()" in new
    assert "seen = round(hvd.allreduce(torch.tensor(seen, dtype=torch.float64), op=hvd.Average).item())" in new


def test_sharded_data_is_still_summed() -> None:
    sharded = SCRIPT.replace("    batches = [(torch.randn(8, 4), torch.randn(8, 1)) for _ in range(5)]\n",
                             "    data = torch.utils.data.TensorDataset(torch.randn(40, 4), torch.randn(40, 1))\n"
                             "    batches = torch.utils.data.DataLoader(data, batch_size=8)\n")
    new = migrate_source(sharded, "ddp").new
    assert "total = figures[0].item()\n" in new and "seen = int(figures[1].item())" in new
