"""What the recorder's audit hook records, and its copy on write in a run's working folder."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from migrator.verify.writes import WriteLog

WRITE = os.O_WRONLY | os.O_CREAT | os.O_TRUNC
APPEND = os.O_WRONLY | os.O_CREAT | os.O_APPEND


def log_in(sandbox, ignored=()):
    return WriteLog(sandbox, list(ignored), lambda: 3)


def test_files_opened_for_writing_are_recorded_relative_to_the_run_folder(tmp_path):
    log = log_in(tmp_path)
    log.audit("open", (str(tmp_path / "out" / "model.pt"), "w", WRITE))
    log.audit("open", (str(tmp_path / "data.csv"), "r", os.O_RDONLY))  # a read
    log.audit("os.mkdir", (str(tmp_path / "out"), 0o777, -1))
    log.audit("os.rename", (str(tmp_path / "tmp.pt"), str(tmp_path / "best.pt"), -1, -1))
    assert log.as_list() == [
        {"path": "out/model.pt", "kind": "file", "how": "open", "step": 3},
        {"path": "out", "kind": "folder", "how": "mkdir", "step": 3},
        {"path": "best.pt", "kind": "file", "how": "rename", "step": 3},
    ]


def test_bytecode_verifys_own_folders_and_home_caches_are_not_output(tmp_path):
    own = tmp_path / "verify-work"
    log = log_in(tmp_path / "sandbox", ignored=[own])
    for path in (
        own / "rank0.json",
        tmp_path / "sandbox" / "__pycache__" / "m.cpython-311.pyc",
        os.path.expanduser("~/.cache/matplotlib/fontlist.json"),
        os.path.join(sys.prefix, "lib", "x.txt"),
        "/dev/null",
    ):
        log.audit("open", (str(path), "w", WRITE))
    log.audit("open", (str(tmp_path / "elsewhere.txt"), "w", WRITE))
    assert [entry["path"] for entry in log.as_list()] == [str(tmp_path / "elsewhere.txt")]


def test_a_link_to_the_users_file_becomes_the_runs_own_before_it_is_written(tmp_path):
    user = tmp_path / "user"
    run = tmp_path / "run"
    user.mkdir()
    run.mkdir()
    (user / "log.txt").write_text("kept\n")
    (user / "model.pt").write_text("old weights")
    (run / "log.txt").symlink_to(user / "log.txt")
    (run / "model.pt").symlink_to(user / "model.pt")
    log = log_in(run)
    log.audit("open", (str(run / "log.txt"), "a", APPEND))
    log.audit("open", (str(run / "model.pt"), "w", WRITE))
    assert not (run / "log.txt").is_symlink() and (run / "log.txt").read_text() == "kept\n"
    assert not (run / "model.pt").exists()  # truncated anyway: nothing to copy
    with open(run / "log.txt", "a") as handle:
        handle.write("run\n")
    assert (user / "log.txt").read_text() == "kept\n"
    assert (user / "model.pt").read_text() == "old weights"


def test_the_hook_and_torch_save_record_a_real_scripts_writes(tmp_path):
    code = (
        "import json, os, sys\n"
        "from pathlib import Path\n"
        "from migrator.verify import writes\n"
        "log = writes.WriteLog(Path.cwd(), [], lambda: 0)\n"
        "saved = []\n"
        "writes.install(log, lambda obj, path: saved.append(path))\n"
        "import numpy, torch\n"
        "os.makedirs('ckpt', exist_ok=True)\n"
        "torch.save({'w': torch.ones(2)}, 'ckpt/model.pt')\n"
        "numpy.save('emb.npy', numpy.zeros(3))\n"
        "open('notes.txt', 'w').close()\n"
        "sys.stdout.write(json.dumps([log.as_list(), saved]))\n"
    )
    output = subprocess.run(
        [sys.executable, "-c", code],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    ).stdout
    entries, saved = json.loads(output)
    assert [(e["path"], e["how"]) for e in entries] == [
        ("ckpt", "mkdir"),
        ("ckpt/model.pt", "torch.save"),
        ("emb.npy", "open"),
        ("notes.txt", "open"),
    ]
    assert saved == ["ckpt/model.pt"]
