"""A helper is not migrated without its callers (issue 26: data sharded twice, a caller that
already runs native DDP): a definition that now prepares what its callers pass in
(`Finding.prepares_for`) is left as it is when a project file outside the migration calls it,
whichever way that file imports it (`from pkg.mod import Trainer`, `import mod as m`, a
relative import, a package cloned under another name). Tests calling the helper do not count,
nor do calls in the file itself. An entry importing its own package by name (`ddp/main.py`:
`from ddp.trainer import Trainer`) finds it with no project marker (h7 Zhiyang, h6 pseudoESM)."""

from __future__ import annotations

import ast
import textwrap
from pathlib import Path

import pytest

from migrator.program.imports import package_parents, search_path
from tests.test_programs import findings_of, run_cli

TRAINER_CLASS = """\
    import torch


    class Trainer:
        def __init__(self, model, optimizer, loader):
            self.model = model
            self.optimizer, self.loader = optimizer, loader

        def fit(self, epochs):
            for _ in range(epochs):
                for x, y in self.loader:
                    self.optimizer.zero_grad()
                    loss = torch.nn.functional.mse_loss(self.model(x), y)
                    loss.backward()
                    self.optimizer.step()
    """

TRAIN_FUNCTION = """\
    import torch


    def fit(model, loader, epochs):
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        for _ in range(epochs):
            for x, y in loader:
                optimizer.zero_grad()
                loss = torch.nn.functional.mse_loss(model(x), y)
                loss.backward()
                optimizer.step()
    """

NATIVE_DDP = """\
    import torch
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel as DDP
    from torch.utils.data import DataLoader, DistributedSampler, TensorDataset
    {imports}


    def main():
        dist.init_process_group("gloo")
        data = TensorDataset(torch.randn(64, 3), torch.randn(64, 1))
        loader = DataLoader(data, batch_size=8, sampler=DistributedSampler(data))
        model = DDP(torch.nn.Linear(3, 1))
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        {call}


    if __name__ == "__main__":
        main()
    """


def _write(folder: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        path = folder / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))


def _caller(imports: str, call: str) -> str:
    return NATIVE_DDP.format(imports=imports, call=call)


CASES = {
    "class in a package, imported by its dotted path": (
        {
            "ddp/__init__.py": "",
            "ddp/trainer.py": TRAINER_CLASS,
            "ddp/main.py": _caller(
                "from ddp.trainer import Trainer", "Trainer(model, optimizer, loader).fit(2)"
            ),
        },
        "ddp/trainer.py",
        ("Trainer", "ddp/main.py (line 14)"),
    ),
    "function through a module alias": (
        {
            "engine.py": TRAIN_FUNCTION,
            "run.py": _caller("import engine as e", "e.fit(model, loader, 2)"),
        },
        "engine.py",
        ("fit", "run.py (line 14)"),
    ),
    "function through a relative import": (
        {
            "pkg/__init__.py": "",
            "pkg/engine.py": TRAIN_FUNCTION,
            "pkg/launch.py": _caller(
                "from .engine import fit as run_epochs", "run_epochs(model, loader, 2)"
            ),
        },
        "pkg/engine.py",
        ("fit", "launch.py (line 14)"),
    ),
    "module imported from its package": (
        {
            "lib/__init__.py": "",
            "lib/engine.py": TRAIN_FUNCTION,
            "main.py": _caller("from lib import engine", "engine.fit(model, loader, 2)"),
        },
        "lib/engine.py",
        ("fit", "main.py (line 14)"),
    ),
}


@pytest.mark.parametrize("case", CASES, ids=list(CASES))
def test_a_helper_whose_caller_elsewhere_is_not_migrated_is_left_as_it_is(
    case, tmp_path, monkeypatch, capsys
):
    files, helper, (name, caller) = CASES[case]
    _write(tmp_path, files)
    before = (tmp_path / helper).read_text()
    code, report = run_cli(tmp_path, monkeypatch, capsys, helper)
    assert (tmp_path / helper).read_text() == before
    (item,) = [entry for entry in report["files"] if entry["path"] == helper]
    refusal = next(f for f in item["findings"] if f["code"] == "MIG910")
    assert refusal["level"] == "warning"
    assert f"`{name}` now prepares what its callers pass in" in refusal["message"]
    assert caller in refusal["message"]
    assert code == 1


def test_a_bulk_run_migrates_the_helper_with_its_caller(tmp_path, monkeypatch, capsys):
    """`migrate .`: the caller is the entry of a program holding the helper, migrated with it
    (its DistributedSampler and DDP wrap go), so the helper has no caller outside."""
    _write(tmp_path, {"engine.py": TRAIN_FUNCTION,
                      "run.py": _caller("import engine", "engine.fit(model, loader, 2)")})  # fmt: skip
    _code, report = run_cli(tmp_path, monkeypatch, capsys, ".")
    assert not [f for f in findings_of(report) if f.endswith("MIG910")]
    assert "accelerator.prepare(model, optimizer, loader)" in (tmp_path / "engine.py").read_text()
    caller = (tmp_path / "run.py").read_text()
    assert "DistributedSampler" not in caller and "DDP(" not in caller


def test_callers_in_tests_and_in_the_file_itself_do_not_count(tmp_path, monkeypatch, capsys):
    script = TRAIN_FUNCTION + textwrap.indent(
        textwrap.dedent("""\


        if __name__ == "__main__":
            from torch.utils.data import DataLoader, TensorDataset

            data = TensorDataset(torch.randn(64, 3), torch.randn(64, 1))
            model = torch.nn.Linear(3, 1)
            fit(model, DataLoader(data), 2)
        """),
        "    ",
    )
    test = """\
        import torch
        from torch.utils.data import DataLoader, TensorDataset

        from train import fit


        def test_fit_runs():
            model = torch.nn.Linear(3, 1)
            data = TensorDataset(torch.randn(8, 3), torch.randn(8, 1))
            fit(model, torch.optim.SGD(model.parameters(), lr=0.1), DataLoader(data), 1)
        """
    _write(tmp_path, {"train.py": script, "tests/test_train.py": test})
    before = (tmp_path / "train.py").read_text()
    _code, report = run_cli(tmp_path, monkeypatch, capsys, "train.py")
    assert (tmp_path / "train.py").read_text() != before
    assert "accelerator.prepare(" in (tmp_path / "train.py").read_text()
    assert not [f for f in findings_of(report) if f.endswith("MIG910")]


def test_objects_kept_from_parameters_count_as_passed_in(tmp_path, monkeypatch, capsys):
    """`self.model = model`, `self.optimizer, self.loader = optimizer, loader`: MIG006 says the
    callers pass them in, with no caller outside to refuse for."""
    _write(tmp_path, {"trainer.py": TRAINER_CLASS})
    _code, report = run_cli(tmp_path, monkeypatch, capsys, "trainer.py")
    (item,) = report["files"]
    notes = [f["message"] for f in item["findings"] if "which its callers pass in" in f["message"]]
    assert len(notes) == 1
    for name in ("self.model", "self.optimizer", "self.loader"):
        assert f"`{name}`" in notes[0]


@pytest.mark.parametrize(
    "source, expected",
    [
        ("from ddp.trainer import Trainer", ["project"]),
        ("import ddp.utils as u", ["project"]),
        ("from trainer import Trainer", []),
        ("from .trainer import Trainer", []),
    ],
)
def test_an_entry_importing_its_own_package_by_name_searches_above_it(source, expected, tmp_path):
    folder = tmp_path / "project" / "ddp"
    folder.mkdir(parents=True)
    found = package_parents(ast.parse(source), folder)
    assert [path.name for path in found] == expected


def test_the_package_parent_joins_the_program_without_a_marker(tmp_path):
    folder = tmp_path / "repo" / "ddp"
    folder.mkdir(parents=True)
    (folder / "trainer.py").write_text(textwrap.dedent(TRAINER_CLASS))
    entry = folder / "main.py"
    entry.write_text("from ddp.trainer import Trainer\n")
    assert search_path(entry) == [folder.resolve(), (tmp_path / "repo").resolve()]
