"""Programs of several files (migrator/program.py): golden fixtures under fixtures/programs/
(a folder per program: in/ as written, out/ as reviewed; no out/ means nothing may change),
the CLI over programs, and a migrated program running on two processes and verified.

A fixture's entry is in/main.py unless its folder has an `entry` file naming it; the findings
it must report are listed in its `findings` file, one `path:CODE` a line."""

from __future__ import annotations

import ast
import json
import os
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from migrator.command import FixRequest, run_fix
from migrator.engine import Options
from migrator.program.unit import migrate_program

ROOT = Path(__file__).resolve().parent.parent
PROGRAMS = ROOT / "fixtures" / "programs"
IGNORED = {"__pycache__"}


def program_fixtures() -> list[Path]:
    return sorted(path for path in PROGRAMS.iterdir() if (path / "in").is_dir())


def entry_of(fixture: Path) -> str:
    named = fixture / "entry"
    return named.read_text().strip() if named.exists() else "main.py"


def tree_files(folder: Path) -> dict[str, bytes]:
    found = {}
    for path in sorted(folder.rglob("*")):
        if path.is_file() and not IGNORED & set(path.relative_to(folder).parts):
            found[path.relative_to(folder).as_posix()] = path.read_bytes()
    return found


def run_cli(folder: Path, monkeypatch, capsys, *arguments: str, mode: str = "write"):
    """`migrate ARGUMENTS --MODE --format json` run in `folder`: (exit code, JSON report)."""
    monkeypatch.chdir(folder)
    capsys.readouterr()
    code = run_fix(
        FixRequest(paths=list(arguments), mode=mode, output_format="json", no_cache=True)
    )
    return code, json.loads(capsys.readouterr().out)


def findings_of(report: dict) -> list[str]:
    return sorted(
        f"{item['path']}:{f['code']}" for item in report["files"] for f in item["findings"]
    )


@pytest.mark.parametrize("fixture", program_fixtures(), ids=lambda p: p.name)
def test_program_fixture_writes_its_reviewed_output(fixture, tmp_path, monkeypatch, capsys,
                                                    update_golden):  # fmt: skip
    work = tmp_path / "program"
    shutil.copytree(fixture / "in", work)
    _, report = run_cli(work, monkeypatch, capsys, entry_of(fixture))
    expected_folder = fixture / "out" if (fixture / "out").is_dir() else fixture / "in"
    if update_golden and (fixture / "out").is_dir():
        shutil.rmtree(fixture / "out")
        shutil.copytree(work, fixture / "out", ignore=shutil.ignore_patterns("__pycache__"))
    assert tree_files(work) == tree_files(expected_folder)
    declared = fixture / "findings"
    expected = sorted(declared.read_text().split()) if declared.exists() else []
    assert findings_of(report) == expected


@pytest.mark.parametrize(
    "fixture", [f for f in program_fixtures() if (f / "out").is_dir()], ids=lambda p: p.name
)
def test_migrated_program_parses_and_is_stable(fixture, tmp_path, monkeypatch, capsys):
    work = tmp_path / "program"
    shutil.copytree(fixture / "out", work)
    for source in tree_files(work).values():
        ast.parse(source)
    code, report = run_cli(work, monkeypatch, capsys, entry_of(fixture), mode="check")
    assert code == 0, report
    assert report["summary"]["changed"] == 0
    assert tree_files(work) == tree_files(fixture / "out")


def test_diff_of_the_entry_shows_every_file_it_changes(tmp_path, monkeypatch, capsys):
    work = tmp_path / "program"
    shutil.copytree(PROGRAMS / "engine_function" / "in", work)
    monkeypatch.chdir(work)
    code = run_fix(FixRequest(paths=["main.py"], mode="diff", no_cache=True))
    captured = capsys.readouterr()
    assert code == 1
    assert "--- engine.py\n+++ engine.py\n" in captured.out
    assert "--- main.py\n+++ main.py\n" in captured.out
    assert "models.py" not in captured.out  # imported, but no training step: not a member
    assert "+        accelerator.backward(loss)" in captured.out
    assert "(1 multi-file program, 1 file included)" in captured.err
    assert tree_files(work) == tree_files(
        PROGRAMS / "engine_function" / "in"
    )  # diff writes nothing


def test_check_of_a_folder_counts_programs_and_names_their_files(tmp_path, monkeypatch, capsys):
    for name in ("engine_function", "package_relative"):
        shutil.copytree(PROGRAMS / name / "in", tmp_path / name)
    code, report = run_cli(tmp_path, monkeypatch, capsys, ".", mode="check")
    assert code == 1
    changed = sorted(item["path"] for item in report["files"] if item["changed"])
    assert changed == [
        "engine_function/engine.py", "engine_function/main.py", "package_relative/train.py",
        "package_relative/trainer/loop.py", "package_relative/trainer/steps.py",
    ]  # fmt: skip
    assert report["summary"]["programs"] == 2
    assert report["summary"]["included"] == 0
    entries = {item["path"]: item.get("program") for item in report["files"]}
    assert entries["engine_function/engine.py"] == "engine_function/main.py"
    assert entries["package_relative/trainer/steps.py"] == "package_relative/train.py"
    assert entries["engine_function/models.py"] is None  # imported, not a member


def test_in_a_bulk_run_a_helper_gets_its_programs_migration(tmp_path, monkeypatch, capsys):
    """engine.py alone has a migration of its own (the objects prepared inside the function);
    with its entry in the run it gets the program's: the accelerator as a parameter."""
    work = tmp_path / "program"
    shutil.copytree(PROGRAMS / "engine_function" / "in", work)
    run_cli(work, monkeypatch, capsys, ".")
    assert tree_files(work) == tree_files(PROGRAMS / "engine_function" / "out")


def test_a_program_is_written_all_or_nothing(tmp_path, monkeypatch, capsys):
    work = tmp_path / "program"
    shutil.copytree(PROGRAMS / "engine_function" / "in", work)
    engine = work / "engine.py"
    engine.chmod(stat.S_IRUSR)  # read-only: main.py must not be written either
    try:
        code, report = run_cli(work, monkeypatch, capsys, "main.py")
    finally:
        engine.chmod(stat.S_IRUSR | stat.S_IWUSR)
    assert code == 2
    errors = {item["path"]: item["error"] for item in report["files"] if item["error"]}
    assert set(errors) == {"engine.py", "main.py"}
    assert "read-only" in errors["main.py"]
    assert tree_files(work) == tree_files(PROGRAMS / "engine_function" / "in")


def test_select_applies_across_the_program(tmp_path, monkeypatch, capsys):
    work = tmp_path / "program"
    shutil.copytree(PROGRAMS / "engine_function" / "in", work)
    monkeypatch.chdir(work)
    code = run_fix(FixRequest(paths=["main.py"], mode="write", ignore="MIG021", no_cache=True))
    assert code == 0
    engine = (work / "engine.py").read_text()
    assert "accelerator.backward(loss)" in engine
    assert "torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm)" in engine
    assert "accelerator.print" in engine + (work / "main.py").read_text()


def test_ignoring_the_main_process_rule_leaves_a_program_that_writes_as_it_is(
    tmp_path, monkeypatch, capsys
):
    """Without MIG030 its checkpoint would be written by every process: the soundness check
    (MIG952, which no --ignore turns off) leaves the program unchanged and says why."""
    work = tmp_path / "program"
    shutil.copytree(PROGRAMS / "engine_function" / "in", work)
    before = {p.name: p.read_text() for p in work.glob("*.py")}
    monkeypatch.chdir(work)
    code = run_fix(FixRequest(paths=["main.py"], mode="write", ignore="MIG030", no_cache=True))
    assert code == 1
    assert {p.name: p.read_text() for p in work.glob("*.py")} == before
    assert "MIG952 `torch.save(...)`" in capsys.readouterr().err


def test_an_entry_importing_no_helper_is_not_a_program(tmp_path):
    script = tmp_path / "train.py"
    script.write_text("import torch\nimport numpy\nfrom models import Net\n")
    (tmp_path / "models.py").write_text("class Net:\n    pass\n")
    assert migrate_program(script, Options()) is None


def test_imports_resolve_from_the_project_root_for_a_script_in_a_subfolder(tmp_path):
    """`python scripts/train.py` with the package at the project root (pip install -e .)."""
    shutil.copytree(PROGRAMS / "package_relative" / "in" / "trainer", tmp_path / "trainer")
    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'demo'\n")
    (tmp_path / "scripts").mkdir()
    entry = tmp_path / "scripts" / "train.py"
    shutil.copy(PROGRAMS / "package_relative" / "in" / "train.py", entry)
    program = migrate_program(entry, Options())
    names = [path.relative_to(tmp_path).as_posix() for path in program.paths]
    assert names == ["scripts/train.py", "trainer/loop.py", "trainer/steps.py"]
    assert all(result.changed for result in program.results)


# -- a migrated program runs -------------------------------------------------------------------
def _python_env() -> dict[str, str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}
    env.pop("WORLD_SIZE", None)
    return env


def test_the_migrated_program_trains_on_two_processes(tmp_path):
    work = tmp_path / "program"
    shutil.copytree(PROGRAMS / "engine_function" / "out", work)
    launch = [sys.executable, "-m", "migrator", "launch", "--nproc", "2", "main.py"]
    done = subprocess.run(
        launch, cwd=work, env=_python_env(), capture_output=True, text=True, timeout=300,
        check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.count("epoch 1: train") == 1  # accelerator.print: the main process only
    assert (work / "checkpoint.pth").exists()


def test_verify_says_a_migrated_program_is_equivalent(tmp_path):
    work = tmp_path / "program"
    shutil.copytree(PROGRAMS / "engine_function" / "in", work)
    command = [sys.executable, "-m", "migrator", "verify", "main.py", "--nproc", "2",
               "--format", "json"]  # fmt: skip
    done = subprocess.run(
        command, cwd=work, env={**_python_env(), "TMPDIR": str(tmp_path)}, capture_output=True,
        text=True, timeout=300, check=False,
    )  # fmt: skip
    report = json.loads(done.stdout)
    assert done.returncode == 0, done.stderr[-3000:]
    assert report["verdict"] == "EQUIVALENT"
    sources = {name: data for name, data in tree_files(work).items() if name.endswith(".py")}
    assert sources == tree_files(PROGRAMS / "engine_function" / "in")  # migrated in a copy only


def test_a_module_shared_by_two_entries_is_migrated_once_or_refused(tmp_path, monkeypatch, capsys):
    """train.py calls train_one_epoch and evaluate; finetune.py only train_one_epoch, so its
    program would leave evaluate's batches on the device: engine.py would come out two ways."""
    work = tmp_path / "program"
    shutil.copytree(PROGRAMS / "engine_function" / "in", work)
    main = (work / "main.py").read_text()
    (work / "finetune.py").write_text(
        main.replace("from engine import evaluate, train_one_epoch", "from engine import train_one_epoch")
        .replace("        test_stats = evaluate(model, criterion_eval, data_loader_val, device)\n", "")
        .replace(" val {test_stats['loss']:.4f}", "")
    )  # fmt: skip
    code, report = run_cli(work, monkeypatch, capsys, ".", mode="check")
    assert code == 1
    assert report["summary"]["changed"] == 0
    shared = [f["message"] for item in report["files"] for f in item["findings"]
              if "shared with" in f["message"]]  # fmt: skip
    assert len(shared) == 2 and any("finetune.py" in m for m in shared)
    assert (
        tree_files(work)["engine.py"]
        == tree_files(PROGRAMS / "engine_function" / "in")["engine.py"]
    )


def test_native_ddp_helpers_join_the_program(tmp_path):
    """`utils.init_distributed_mode(args)` starts a process group: its module is a member, so
    the program migrates only when that set-up can go (as in one file), never beside it."""
    shutil.copytree(PROGRAMS / "engine_function" / "in", tmp_path, dirs_exist_ok=True)
    (tmp_path / "utils.py").write_text(
        "import torch.distributed as dist\n\n\n"
        "def init_distributed_mode(args):\n    dist.init_process_group('gloo')\n"
    )
    (tmp_path / "helpers.py").write_text("def unrelated():\n    return 1  # no backward() here\n")
    main = (tmp_path / "main.py").read_text()
    (tmp_path / "main.py").write_text(
        main.replace("import argparse\n", "import argparse\n\nimport helpers\nimport utils\n")
    )
    program = migrate_program(tmp_path / "main.py", Options())
    assert [path.name for path in program.paths] == ["main.py", "utils.py", "engine.py"]


def test_files_with_different_line_endings_are_not_joined(tmp_path):
    shutil.copytree(PROGRAMS / "engine_function" / "in", tmp_path, dirs_exist_ok=True)
    engine = tmp_path / "engine.py"
    engine.write_bytes(engine.read_bytes().replace(b"\n", b"\r\n"))
    program = migrate_program(tmp_path / "main.py", Options())
    assert not any(result.changed for result in program.results)
    finding, left = program.results[0].findings
    assert finding.code == "MIG910" and "LF and CRLF" in finding.message
    assert left.code == "MIG950" and (left.line, left.col) == (finding.line, finding.col)


def test_a_crlf_program_stays_crlf(tmp_path, monkeypatch, capsys):
    work = tmp_path / "program"
    shutil.copytree(PROGRAMS / "engine_function" / "in", work)
    for path in work.glob("*.py"):
        path.write_bytes(path.read_bytes().replace(b"\n", b"\r\n"))
    code, _ = run_cli(work, monkeypatch, capsys, "main.py")
    assert code == 0
    for name, data in tree_files(work).items():
        expected = tree_files(PROGRAMS / "engine_function" / "out")[name]
        assert data == expected.replace(b"\n", b"\r\n"), name


def _entry_without_top_level_imports(tmp_path: Path, guarded: bool) -> None:
    """engine_function with the entry's imports moved into main(): the joined module's last
    import is then the helper's. `guarded`: main() still runs from `if __name__ == ...:`."""
    shutil.copytree(PROGRAMS / "engine_function" / "in", tmp_path, dirs_exist_ok=True)
    main = (tmp_path / "main.py").read_text()
    header, _, rest = main.partition("\n\n\ndef get_args")
    imports = [line.strip() for line in header.splitlines() if line.startswith(("import", "from"))]
    body = "def get_args" + rest.replace(
        "def main(args):\n", "def main(args):\n" + "".join(f"    {line}\n" for line in imports)
    ).replace("def get_args():\n", "def get_args():\n    import argparse\n\n")
    if not guarded:
        body = body.replace('if __name__ == "__main__":\n    main(get_args())', "main(get_args())")
    (tmp_path / "main.py").write_text(body)


def test_an_accelerator_that_would_be_created_in_a_helper_is_refused(tmp_path):
    """A module-level Accelerator() (main() runs at import) would land after the helper's
    imports, in engine.py: refused, nothing changes."""
    _entry_without_top_level_imports(tmp_path, guarded=False)
    program = migrate_program(tmp_path / "main.py", Options())
    assert not any(result.changed for result in program.results)
    messages = [f.message for r in program.results for f in r.findings if f.code == "MIG910"]
    assert messages and "engine.py" in messages[0]


def test_an_accelerator_for_a_guarded_entry_is_made_in_the_entry_s_guard(tmp_path):
    """main() runs only from the entry's `if __name__ == "__main__":`: the Accelerator is made
    there, in the entry, whatever the joined module's last import is."""
    _entry_without_top_level_imports(tmp_path, guarded=True)
    program = migrate_program(tmp_path / "main.py", Options())
    main, engine = (r.migrated.decode() for r in program.results[:2])
    assert main.endswith(
        'if __name__ == "__main__":\n    accelerator = Accelerator()\n    main(get_args())\n'
    )
    assert "Accelerator(" not in engine
    assert "def train_one_epoch(" in engine and "*, accelerator)" in engine


def test_the_same_top_level_statement_in_two_files_is_no_clash(tmp_path):
    shutil.copytree(PROGRAMS / "engine_function" / "in", tmp_path, dirs_exist_ok=True)
    for name in ("main.py", "engine.py"):
        path = tmp_path / name
        path.write_text(
            path.read_text().replace(
                "import torch\n", "import torch\n\nSEED = 0\n__all__ = []\n", 1
            )
        )
    program = migrate_program(tmp_path / "main.py", Options())
    assert all(result.changed for result in program.results)
    (tmp_path / "engine.py").write_text(
        (tmp_path / "engine.py").read_text().replace("SEED = 0", "SEED = 1")
    )
    program = migrate_program(tmp_path / "main.py", Options())
    assert not any(result.changed for result in program.results)
    assert "`SEED` is defined both in" in program.results[0].findings[0].message


def test_one_module_imported_in_two_spellings_is_no_clash(tmp_path):
    """`import torch.nn as nn` in one file, `from torch import nn` in the other: one module."""
    shutil.copytree(PROGRAMS / "engine_function" / "in", tmp_path, dirs_exist_ok=True)
    for name, spelling in (
        ("main.py", "import torch.nn as nn"),
        ("engine.py", "from torch import nn"),
    ):
        path = tmp_path / name
        path.write_text(
            path.read_text().replace("import torch\n", f"import torch\n{spelling}\n", 1)
        )
    program = migrate_program(tmp_path / "main.py", Options())
    assert all(result.changed for result in program.results), [
        f.message for r in program.results for f in r.findings
    ]
    (tmp_path / "engine.py").write_text(
        (tmp_path / "engine.py")
        .read_text()
        .replace("from torch import nn", "import mylib.nn as nn")
    )
    program = migrate_program(tmp_path / "main.py", Options())
    assert not any(result.changed for result in program.results)


def test_a_script_that_migrates_alone_keeps_its_own_migration(tmp_path, monkeypatch, capsys):
    """train.py has its own loop and imports a module with an unrelated backward (a gradient
    check) that the joined analysis refuses (MIG905): the file's own migration stands, and the
    module is not touched."""
    script = (ROOT / "fixtures" / "golden" / "seed000_minimal_loop.in.py").read_text()
    (tmp_path / "train.py").write_text("import extras\n" + script)
    (tmp_path / "extras.py").write_text(
        "def gradient_of_sum(x):\n    x.sum().backward()\n    return x.grad\n"
    )
    code, report = run_cli(tmp_path, monkeypatch, capsys, "train.py", mode="check")
    assert code == 1
    changed = [item["path"] for item in report["files"] if item["changed"]]
    assert changed == ["train.py"] and report["summary"]["programs"] == 0
    assert migrate_program(tmp_path / "train.py", Options()).paths[1].name == "extras.py"


def test_a_helper_passed_around_as_a_value_is_refused(tmp_path):
    """`step = train_one_epoch` then `step(...)`: no call of the name itself can pass the
    accelerator, so the program is refused rather than left failing at run time."""
    shutil.copytree(PROGRAMS / "engine_function" / "in", tmp_path, dirs_exist_ok=True)
    main = (tmp_path / "main.py").read_text()
    main = main.replace("    for epoch in range(args.epochs):\n",
                        "    hook = train_one_epoch\n    for epoch in range(args.epochs):\n")  # fmt: skip
    (tmp_path / "main.py").write_text(main)
    program = migrate_program(tmp_path / "main.py", Options())
    assert not any(result.changed for result in program.results)
    assert any("used as a value in main.py" in f.message for f in program.results[0].findings)


def test_an_accelerator_made_global_in_main_reaches_the_entrys_other_functions(tmp_path):
    from migrator.program.files import ProgramError, read_file
    from migrator.program.reach import check_reach

    entry = tmp_path / "main.py"
    helper = tmp_path / "engine.py"
    entry.write_text("import engine\n")
    helper.write_text("def step(loss, *, accelerator):\n    accelerator.backward(loss)\n")
    files = [read_file(entry), read_file(helper)]
    made_global = (
        "def main():\n    global accelerator\n    accelerator = Accelerator()\n\n\n"
        "def report():\n    accelerator.print('done')\n"
    )
    check_reach([made_global, helper.read_text()], files)  # no error: main() binds it globally
    with pytest.raises(ProgramError, match="main.py would use an accelerator it cannot see"):
        check_reach(
            [made_global.replace("    global accelerator\n", ""), helper.read_text()], files
        )


def test_an_unparsable_file_named_alone_is_not_a_crash(tmp_path, monkeypatch, capsys):
    """The prefilter skips it unparsed, as before programs; looking for its program must not
    raise on it either."""
    (tmp_path / "broken.py").write_text("import engine\ndef (\n")
    (tmp_path / "engine.py").write_text("def step(loss):\n    loss.backward()\n")
    code, report = run_cli(tmp_path, monkeypatch, capsys, "broken.py", mode="check")
    assert code == 0 and report["files"][0]["skipped"] and report["summary"]["programs"] == 0


def test_lines_a_finding_names_are_counted_in_their_own_files():
    """The analysis sees the joined module (helpers first): a line its message names is put
    back in the finding's file, or named with its file when it is in another one."""
    from migrator.program.files import ProgramFile
    from migrator.program.findings import lines_in_files

    def member(name: str, start: int, lines: int) -> ProgramFile:
        return ProgramFile(Path(name), b"", "", "utf-8", ast.parse(""), start, lines)

    files = [member("main.py", 20, 30), member("misc.py", 1, 18)]  # joined: misc.py, then main.py
    message = "`s` is used at line 25 and line 3; bound at line(s) 22, 5; lines 40-44"
    assert lines_in_files(message, files, 0) == (
        "`s` is used at line 6 and line 3 of misc.py; bound at line(s) 3, 5 of misc.py; lines 21-25"
    )
    assert lines_in_files("see line 25", files, 1) == "see line 6 of main.py"


def test_an_entry_whose_optimizer_comes_from_a_factory_is_grouped_in_a_bulk_run(
    tmp_path, monkeypatch, capsys
):
    """ConvNeXt/BEiT: `optimizer = create_optimizer(args, model)` from the project's
    optim_factory.py. The entry alone gets MIG910 (the factory is named for an optimizer), so
    a bulk run analyses it with its engine, instead of leaving it untouched and migrating the
    engine alone (a train_one_epoch preparing what it receives). The factory is handed the
    model the loop runs: that is the model it trains, prepared with it in the entry."""
    work = tmp_path / "program"
    shutil.copytree(PROGRAMS / "engine_function" / "in", work)
    (work / "optim_factory.py").write_text(
        "import torch\n\n\ndef create_optimizer(args, model):\n"
        "    return torch.optim.AdamW(model.parameters(), lr=args.lr)\n"
    )
    main = (work / "main.py").read_text()
    (work / "main.py").write_text(
        main.replace("from models import build_model\n",
                     "from models import build_model\nfrom optim_factory import create_optimizer\n")
        .replace("torch.optim.AdamW(model.parameters(), lr=args.lr)", "create_optimizer(args, model)")
    )  # fmt: skip
    _, report = run_cli(work, monkeypatch, capsys, ".", mode="check")
    assert report["summary"]["programs"] == 1
    assert sorted(item["path"] for item in report["files"] if item["changed"]) == [
        "engine.py",
        "main.py",
    ]
    # notes only: MIG953 says which printed numbers stay each process's own
    assert not [f for f in findings_of(report) if "MIG9" in f and not f.endswith("MIG953")]
    _, report = run_cli(work, monkeypatch, capsys, ".", mode="write")
    written = (work / "main.py").read_text()
    assert "= create_optimizer(args, model)" in written
    assert "model, optimizer" in written and "accelerator.prepare(" in written
    assert "accelerator.backward(" in (work / "engine.py").read_text()
    assert "create_optimizer" not in (work / "engine.py").read_text()


def test_a_script_outside_the_program_calling_a_changed_helper_refuses_it(
    tmp_path, monkeypatch, capsys
):
    """eval_only.py calls `engine.evaluate(...)`, which the program of main.py would give a
    keyword-only `accelerator`: written, eval_only.py would fail with a TypeError. Refused,
    naming the script and its line; with `accelerator=` passed there, the program migrates."""
    work = tmp_path / "program"
    shutil.copytree(PROGRAMS / "engine_function" / "in", work)
    script = (
        "import torch\n\nimport engine\nfrom models import build_model\n\n"
        "model = build_model()\nprint(engine.evaluate(model, torch.nn.MSELoss(), [], 'cpu'))\n"
    )
    (work / "eval_only.py").write_text(script)
    _, report = run_cli(work, monkeypatch, capsys, "main.py", mode="check")
    assert not [item["path"] for item in report["files"] if item["changed"]]
    messages = [f["message"] for item in report["files"] for f in item["findings"]
                if f["code"] == "MIG910" and item["path"] == "main.py"]  # fmt: skip
    assert messages == [
        (
            "`engine.evaluate` would need the accelerator, but eval_only.py (line 7), which is "
            "not part of this program, calls it without one; migrate these files by hand"
        )
    ]
    (work / "eval_only.py").write_text(script.replace("'cpu')", "'cpu', accelerator=None)"))
    _, report = run_cli(work, monkeypatch, capsys, "main.py", mode="check")
    changed = sorted(item["path"] for item in report["files"] if item["changed"])
    assert changed == ["engine.py", "main.py"]
