"""Which code runs on every process and which on the main process only
(analysis/effects/processes.py): main-process guards in the spellings real scripts use, and
functions run from guarded and unguarded code."""

from __future__ import annotations

import ast

import pytest

from migrator.analysis.effects.processes import DEAD, EVERY, MAIN, Processes
from migrator.analysis.syntax.index import ModuleIndex
from migrator.source import Source


def processes(code: str) -> tuple[ModuleIndex, Processes]:
    index = ModuleIndex(ast.parse(code), Source(code))
    return index, Processes(index)


def write_statement(index: ModuleIndex):
    """The statement of the one `write(...)` call."""
    return next(site.statement for site in index.calls() if site.method == "write")


@pytest.mark.parametrize(
    "test",
    [
        "accelerator.is_main_process",
        "self.accelerator.is_local_main_process",
        "PartialState().is_main_process",
        "rank == 0",
        "0 == rank",
        "args.local_rank in [-1, 0]",
        "args.rank % ngpus_per_node == 0",
        "not dist.get_rank()",
        "torch.distributed.get_rank() == 0",
        'int(os.environ["RANK"]) == 0',
        "self.gpu_id == 0 and epoch % 5 == 0",
        "is_master()",
    ],
)
def test_a_main_process_guard_keeps_its_body_on_the_main_process(test):
    index, found = processes(f"if {test}:\n    log.write('x')\n")
    assert not found.runs_on_every_process(write_statement(index))


@pytest.mark.parametrize(
    "test",
    ["rank == 1", "epoch == 0", "args.save", "rank == 0 or epoch == 0", "local_rank > 0"],
)
def test_other_tests_do_not_guard(test):
    index, found = processes(f"if {test}:\n    log.write('x')\n")
    assert found.runs_on_every_process(write_statement(index))


def test_the_else_of_a_negated_guard_and_a_later_elif_are_main_only():
    code = (
        "if not accelerator.is_main_process:\n    pass\nelse:\n    log.write('a')\n"
        "if rank != 0:\n    pass\nelif epoch:\n    log.write('b')\n"
    )
    index, found = processes(code)
    writes = [s.statement for s in index.calls() if s.method == "write"]
    assert [found.runs_on_every_process(s) for s in writes] == [False, False]


def test_code_after_an_early_return_of_the_other_processes_is_main_only():
    code = (
        "def save(state):\n    if not accelerator.is_main_process:\n        return\n"
        "    log.write(state)\n\nsave(1)\n"
    )
    index, found = processes(code)
    assert not found.runs_on_every_process(write_statement(index))


def test_a_name_bound_to_a_rank_test_guards():
    code = "master_process = ddp_rank == 0\nif master_process:\n    log.write('x')\n"
    index, found = processes(code)
    assert not found.runs_on_every_process(write_statement(index))


def test_a_function_called_only_under_a_guard_runs_on_the_main_process():
    code = (
        "def save_checkpoint(state, path):\n    log.write(state)\n\n"
        "def main():\n    if rank == 0:\n        save_checkpoint(1, 'p')\n\nmain()\n"
    )
    index, found = processes(code)
    assert found.scope_status(index.functions["save_checkpoint"]) == MAIN
    assert not found.runs_on_every_process(write_statement(index))


def test_a_function_also_called_unguarded_runs_on_every_process():
    code = (
        "def save_checkpoint(state, path):\n    log.write(state)\n\n"
        "def main():\n    if rank == 0:\n        save_checkpoint(1, 'p')\n"
        "    save_checkpoint(2, 'q')\n\nmain()\n"
    )
    index, found = processes(code)
    assert found.scope_status(index.functions["save_checkpoint"]) == EVERY


def test_a_function_handed_to_a_launcher_runs_where_it_is_handed():
    code = "def worker(rank):\n    log.write(rank)\n\nmp.spawn(worker, nprocs=2)\n"
    index, found = processes(code)
    assert found.scope_status(index.functions["worker"]) == EVERY


def test_module_functions_nothing_here_calls_are_entries_for_code_elsewhere():
    code = "def train():\n    def unused():\n        log.write(1)\n    log.write(2)\n"
    index, found = processes(code)
    assert found.scope_status(index.functions["train"]) == EVERY
    assert found.scope_status(index.functions["unused"]) == DEAD


def test_a_method_called_through_self_only_under_a_guard_is_main_only():
    code = (
        "class Trainer:\n"
        "    def _save(self):\n        log.write(1)\n"
        "    def train(self):\n"
        "        if self.accelerator.is_main_process:\n            self._save()\n"
        "Trainer().train()\n"
    )
    index, found = processes(code)
    save = next(s for s in index.scopes if s.name == "_save")
    assert found.scope_status(save) == MAIN


def test_a_decorated_main_process_function_is_main_only():
    code = "@accelerator.on_main_process\ndef report():\n    log.write(1)\n\nreport()\n"
    index, found = processes(code)
    assert found.scope_status(index.functions["report"]) == MAIN
