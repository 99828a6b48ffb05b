"""MIG010 on a DistributedSampler handed to a function of the program that only `set_epoch`s
it: the prepared loader reshuffles each epoch by itself, so the calls go and the argument
becomes None (keyword or positional). A function that uses the sampler any other way keeps
the refusal."""

from __future__ import annotations

from migrator.engine import migrate_text
from tests.test_idioms_objects import launch

HANDED = """\
import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, TensorDataset
from torch.utils.data.distributed import DistributedSampler


def train(model, loader, optimizer, epochs, sampler):
    for epoch in range(epochs):
        {use}
        for x, y in loader:
            loss = torch.nn.functional.mse_loss(model(x), y)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
    print("trained", epochs)


def main():
    dist.init_process_group("gloo")
    torch.manual_seed(0)
    data = TensorDataset(torch.randn(16, 4), torch.randn(16, 1))
    sampler = DistributedSampler(data, shuffle=True)
    loader = DataLoader(data, batch_size=4, sampler=sampler)
    model = DDP(torch.nn.Linear(4, 1))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    train(model, loader, optimizer, 2, {passed})
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
"""


def test_a_sampler_a_function_only_set_epochs_goes_with_its_calls():
    for passed, becomes in (("sampler=sampler", "sampler=None"), ("sampler", "None")):
        output, findings = migrate_text(
            HANDED.format(use="sampler.set_epoch(epoch)", passed=passed)
        )
        assert output is not None, [f.message for f in findings]
        assert "set_epoch" not in output and "DistributedSampler" not in output
        assert f"train(model, loader, optimizer, 2, {becomes})" in output
        assert "DataLoader(data, batch_size=4, shuffle=True)" in output


def test_a_sampler_used_otherwise_in_the_function_is_still_refused():
    output, findings = migrate_text(
        HANDED.format(use="print(len(sampler))", passed="sampler=sampler")
    )
    assert output is None
    assert any(f.code == "MIG907" for f in findings)


def test_the_migrated_program_trains_on_two_processes(tmp_path):
    output, _ = migrate_text(HANDED.format(use="sampler.set_epoch(epoch)", passed="sampler"))
    script = tmp_path / "migrated.py"
    script.write_text(output)
    assert launch(script, tmp_path).stdout.count("trained 2") == 1
