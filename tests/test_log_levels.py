"""MIG030 on `logging` levels: an info level set on every process (`logging.basicConfig(
level=logging.INFO)`, `logger.setLevel(logging.DEBUG)`) holds on each machine's main process,
where `accelerator.print` prints; the others keep warnings and errors. Levels of WARNING and
above, and configurations only the main process runs, are left."""

from __future__ import annotations

from migrator.engine import migrate_text
from tests.test_idioms_objects import launch

LOGGED = """\
import logging

import torch
from torch.utils.data import DataLoader, TensorDataset

{module_setup}


def main():
    {function_setup}
    torch.manual_seed(0)
    loader = DataLoader(TensorDataset(torch.randn(16, 4), torch.randn(16, 1)), batch_size=4)
    model = torch.nn.Linear(4, 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for epoch in range(2):
        for x, y in loader:
            loss = torch.nn.functional.mse_loss(model(x), y)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        logging.info("epoch %d done", epoch)
        logging.warning("epoch %d warned", epoch)


main()
"""


def _migrate(module_setup: str = "", function_setup: str = "pass") -> str:
    output, findings = migrate_text(
        LOGGED.format(module_setup=module_setup, function_setup=function_setup)
    )
    assert output is not None, [f.message for f in findings]
    return output


def test_an_info_level_holds_on_the_main_process():
    output = _migrate(function_setup="logging.basicConfig(level=logging.INFO)")
    assert (
        "    logging.basicConfig(level=logging.INFO if accelerator.is_local_main_process "
        "else logging.WARNING)\n"
    ) in output
    on_import = _migrate(
        module_setup='logging.basicConfig(level="DEBUG")\nlog = logging.getLogger("train")\n'
        "log.setLevel(10)"
    )
    assert (
        'logging.basicConfig(level="DEBUG" if PartialState().is_local_main_process '
        "else logging.WARNING)\n"
    ) in on_import
    assert (
        "log.setLevel(10 if PartialState().is_local_main_process else logging.WARNING)\n"
    ) in on_import
    assert "def main():\n    accelerator = Accelerator()\n" in on_import  # where it was made


def test_quiet_levels_and_main_only_setups_are_left():
    for level in ("logging.WARNING", '"ERROR"', "40"):
        output = _migrate(function_setup=f"logging.basicConfig(level={level})")
        assert f"    logging.basicConfig(level={level})\n" in output, level
    output = _migrate(function_setup='logging.basicConfig(format="%(message)s")')
    assert '    logging.basicConfig(format="%(message)s")\n' in output


def test_two_processes_log_info_once_and_warnings_each(tmp_path):
    script = tmp_path / "migrated.py"
    script.write_text(_migrate(function_setup="logging.basicConfig(level=logging.INFO)"))
    done = launch(script, tmp_path)
    assert done.stderr.count("epoch 1 done") == 1, done.stderr[-2000:]
    assert done.stderr.count("epoch 1 warned") == 2
