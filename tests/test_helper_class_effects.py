"""Writes in methods of project classes the migrated file uses (program/helper_effects.py):
`logger = ResultsLogger(); logger.log(name, loss)` of a class in `results.py` whose `log`
saves a JSON file through `self._save()` runs on the main process only, as a writing helper
function does (h11 review: every process rewrote `results.json` at once, and one could read
it half written)."""

from __future__ import annotations

import ast

import pytest

from migrator.engine import Options, migrate_bytes
from migrator.program.helper_effects import helper_effects

RESULTS = """\
import json
import os


class ResultsLogger:
    def __init__(self, path="results.json"):
        self.path = path
        self.results = {}
        if os.path.exists(path):
            with open(path) as handle:
                self.results = json.load(handle)

    def log(self, name, loss):
        self.results[name] = round(loss, 6)
        self._save()

    def _save(self):
        with open(self.path, "w") as handle:
            json.dump(self.results, handle)

    def report(self):
        for name, loss in self.results.items():
            print(name, loss)
"""

ENTRY = """\
import torch
from torch.utils.data import DataLoader, TensorDataset
@IMPORT@


def main():
    model = torch.nn.Linear(4, 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    loader = DataLoader(TensorDataset(torch.randn(64, 4), torch.randn(64, 1)), batch_size=8)
    for x, y in loader:
        loss = torch.nn.functional.mse_loss(model(x), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    logger = @MAKE@
    logger.log("linear", 0.5)
    logger.report()


main()
"""


def test_the_writing_methods_of_a_helper_class_are_known(tmp_path):
    (tmp_path / "results.py").write_text(RESULTS)
    entry = tmp_path / "train.py"
    entry.write_text("import results\n")
    found = helper_effects(ast.parse(entry.read_text()), entry)
    assert found["results.ResultsLogger.log"].kind == "write"  # through `self._save()`
    assert "results.ResultsLogger._save" in found
    assert "results.ResultsLogger.report" not in found  # prints: no file
    assert "results.ResultsLogger.__init__" not in found  # reads


@pytest.mark.parametrize(
    ("imports", "make"),
    [
        ("from results import ResultsLogger", "ResultsLogger()"),
        ("import results", 'results.ResultsLogger("out.json")'),
        ("from results import ResultsLogger as Keeper", "Keeper()"),
    ],
)
def test_a_call_of_a_writing_method_runs_on_the_main_process(tmp_path, imports, make):
    (tmp_path / "results.py").write_text(RESULTS)
    entry = tmp_path / "train.py"
    entry.write_text(ENTRY.replace("@IMPORT@", imports).replace("@MAKE@", make))
    result = migrate_bytes(entry.read_bytes(), str(entry), Options())
    assert result.migrated is not None, result.findings
    out = result.migrated.decode()
    assert '    if accelerator.is_main_process:\n        logger.log("linear", 0.5)\n' in out, out
    assert "        logger.report()" not in out and "    logger.report()" in out
