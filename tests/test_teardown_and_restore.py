"""Issue 24: the process group's teardown on every way out of the training function (before each
`return` after setup, never after a `while True:` nothing breaks out of), and, for Horovod, an
optimizer bound again by a resume helper's call (`if args.resume: opt = restore(model, path)`):
the replaced one retired, the new one wrapped, or MIG402 naming that line."""

from __future__ import annotations

import textwrap

from migrate import migrate_source

TEARDOWN = "dist.barrier()  # no rank exits while rank 0 still writes its files\n"

BUDGET = textwrap.dedent('''\
    import torch, torch.nn as nn
    from torch.utils.data import DataLoader, TensorDataset

    def main():
        model = nn.Linear(4, 1)
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        loader = DataLoader(TensorDataset(torch.randn(64, 4), torch.randn(64, 1)), batch_size=8, shuffle=True)
        epochs, steps = 0, 0
        while True:
            epochs += 1
            for x, y in loader:
                steps += 1
                opt.zero_grad(); nn.functional.mse_loss(model(x), y).backward(); opt.step()
                if steps >= 100:
                    torch.save(model.state_dict(), "last.pt")
                    return

    if __name__ == "__main__":
        main()
''')


def _lines(code: str, target: str = "ddp") -> list[str]:
    return migrate_source(code, target).new.splitlines()


def _after(lines: list[str], needle: str) -> str:
    """The line after the last one holding `needle`, stripped."""
    return lines[max(i for i, line in enumerate(lines) if needle in line) + 1].strip()


def test_teardown_goes_before_the_return_that_ends_a_loop_without_end() -> None:
    lines = _lines(BUDGET)
    at = [i for i, line in enumerate(lines) if line.strip() == TEARDOWN.strip()]
    assert len(at) == 1
    assert lines[at[0] + 1].strip() == "dist.destroy_process_group()"
    assert lines[at[0] + 2].strip() == "return"
    assert lines[at[0] - 1].strip().startswith("torch.save(")  # after rank 0's save
    assert not any(line.startswith("    dist.destroy") for line in lines)  # nothing unreachable after `while True:`


def test_a_loop_something_breaks_out_of_keeps_its_teardown_after_it() -> None:
    code = BUDGET.replace("                torch.save(model.state_dict(), \"last.pt\")\n                return\n",
                          "                break\n        if steps >= 100:\n            break\n")
    lines = _lines(code)
    assert _after(lines, "            break") == "dist.barrier()  # no rank exits while rank 0 still writes its files"
    assert sum(TEARDOWN.strip() in line for line in lines) == 1


def test_an_early_return_after_setup_tears_down_and_a_nested_function_s_does_not() -> None:
    code = BUDGET.replace("    model = nn.Linear(4, 1)\n", textwrap.indent(textwrap.dedent('''\
        import sys
        model = nn.Linear(4, 1)
        def warm(step):
            return min(1.0, step / 10)
        if "--check" in sys.argv:
            print(model(torch.zeros(1, 4)))
            return
        if "--eval" in sys.argv: return model(torch.zeros(1, 4)).sum()
        '''), "    "))
    lines = _lines(code)
    assert _after(lines, "def warm(step):") == "return min(1.0, step / 10)"
    assert sum(TEARDOWN.strip() in line for line in lines) == 3
    check = next(i for i, line in enumerate(lines) if '"--check" in sys.argv' in line)
    back = next(i for i in range(check, len(lines)) if lines[i].strip() == "return")
    assert [line.strip() for line in lines[back - 2:back]] == [TEARDOWN.strip(), "dist.destroy_process_group()"]
    evaluation = next(i for i, line in enumerate(lines) if '"--eval" in sys.argv' in line)
    assert [line.strip() for line in lines[evaluation + 1:evaluation + 5]] == [
        "result = model(torch.zeros(1, 4)).sum()", TEARDOWN.strip(), "dist.destroy_process_group()", "return result"]


RESUME = textwrap.dedent('''\
    import argparse
    import torch
    import torch.nn as nn
    from torch.utils.data import DataLoader, TensorDataset

    def restore(net, path):
        saved = torch.load(path)
        net.load_state_dict(saved["net"])
        new = torch.optim.Adam(net.parameters())
        new.load_state_dict(saved["opt"])
        return new

    def main():
        parser = argparse.ArgumentParser()
        parser.add_argument("--resume", default="")
        args = parser.parse_args()
        gen = nn.Linear(8, 8)
        gen_opt = torch.optim.Adam(gen.parameters())
        if args.resume:
            gen_opt = restore(gen, args.resume)
        loader = DataLoader(TensorDataset(torch.randn(64, 8)), batch_size=8)
        for (x,) in loader:
            gen_opt.zero_grad()
            gen(x).pow(2).mean().backward()
            gen_opt.step()

    if __name__ == "__main__":
        main()
''')


def test_horovod_wraps_the_optimizer_a_resume_helper_returns_and_retires_the_first() -> None:
    result = migrate_source(RESUME, "horovod")
    lines = result.new.splitlines()
    resumed = next(i for i, line in enumerate(lines) if "gen_opt = restore(gen, args.resume)" in line)
    assert lines[resumed - 1].strip().startswith("gen_opt.set_backward_passes_per_step(sys.maxsize)")
    assert lines[resumed + 1].strip() == "gen_opt = hvd.DistributedOptimizer(gen_opt, named_parameters=gen.named_parameters())"
    assert sum("hvd.DistributedOptimizer(" in line for line in lines) == 2
    line = RESUME.splitlines().index("        gen_opt = restore(gen, args.resume)") + 1
    assert any(f.code == "MIG401" and f.line == line for f in result.findings)


def test_horovod_refuses_a_resume_helper_bound_before_any_wrapped_optimizer() -> None:
    code = RESUME.replace('''    gen_opt = torch.optim.Adam(gen.parameters())
    if args.resume:
        gen_opt = restore(gen, args.resume)
''', '''    if args.resume:
        gen_opt = restore(gen, args.resume)
    else:
        gen_opt = torch.optim.Adam(gen.parameters())
''')
    result = migrate_source(code, "horovod")
    assert result.new == code
    refusal = next(f for f in result.findings if f.code == "MIG402")
    assert refusal.line == code.splitlines().index("        gen_opt = restore(gen, args.resume)") + 1
    assert "gen_opt = restore(gen, args.resume)" in refusal.message


def test_horovod_leaves_a_helper_handed_the_optimizer_to_return_it() -> None:
    code = RESUME.replace("restore(gen, args.resume)", "restore(gen, gen_opt, args.resume)").replace(
        "def restore(net, path):", "def restore(net, opt, path):")
    lines = migrate_source(code, "horovod").new.splitlines()
    assert sum("hvd.DistributedOptimizer(" in line for line in lines) == 1
    assert not any("set_backward_passes_per_step" in line for line in lines)
