"""Migrated golden fixtures run in turn under one `migrate launch --nproc 2`: a driver runs
each in the same two processes (one process-group start for all), from a folder of its own,
and what the main process printed is split per fixture."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

from migrator.engine import migrate_text
from tests.fixtures import GOLDEN, ROOT

DRIVER = textwrap.dedent("""\
    import os, runpy, sys
    for name in sys.argv[1:]:
        os.chdir(os.path.join(os.path.dirname(os.path.abspath(__file__)), name))
        sys.argv = [name + ".py"]  # the fixtures parse their own (empty) command line
        if os.environ["RANK"] == "0":  # the fixtures print on the main process only
            print(f"=== {name}", flush=True)
        sys.path.insert(0, os.getcwd())  # the modules written beside it
        runpy.run_path(name + ".py", run_name="__main__")
        sys.path.pop(0)
    """)


def launch_in_turn(
    folder: Path, fixtures: list[str], scripts: dict | None = None, beside: dict | None = None
) -> dict:
    """Run the golden outputs of `fixtures` (each checked to be what the migrator makes
    today), then the extra `scripts` (name -> source), in `folder`; {name: what was printed}.
    `beside`: {name: {file name: source or bytes}} written next to a fixture (the modules it
    imports, the files it reads)."""
    done = launch_fixtures(folder, fixtures, scripts, beside)
    parts = done.stdout.split("=== ")
    names = [*fixtures, *(scripts or {})]
    return {name: next(p for p in parts if p.startswith(name)) for name in names}


def launch_fixtures(
    folder: Path, fixtures: list[str], scripts: dict | None = None, beside: dict | None = None
) -> subprocess.CompletedProcess:
    """`launch_in_turn`'s run, its completed process (stdout and stderr) returned."""
    sources = {}
    for name in fixtures:
        output = (GOLDEN / f"{name}.out.py").read_text()
        assert migrate_text((GOLDEN / f"{name}.in.py").read_text())[0] == output
        sources[name] = output
    sources.update(scripts or {})
    names = list(sources)
    for name, source in sources.items():
        (folder / name).mkdir()
        (folder / name / f"{name}.py").write_text(source)
        for file_name, content in (beside or {}).get(name, {}).items():
            path = folder / name / file_name
            path.write_bytes(content) if isinstance(content, bytes) else path.write_text(content)
    (folder / "driver.py").write_text(DRIVER)
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}
    for key in ("WORLD_SIZE", "RANK", "LOCAL_RANK"):
        env.pop(key, None)
    command = [sys.executable, "-m", "migrator", "launch", "--nproc", "2", "driver.py", *names]
    done = subprocess.run(command, cwd=folder, env=env, capture_output=True, text=True,
                          timeout=300, check=False)  # fmt: skip
    assert done.returncode == 0, f"{done.stdout}\n{done.stderr[-4000:]}"
    return done


def verify_golden(tmp_path: Path, name: str) -> dict:
    """`migrate verify` of the golden fixture `name`'s input, copied into `tmp_path` (TMPDIR
    too): its JSON report, asserted EQUIVALENT."""
    script = tmp_path / f"{name}.py"
    script.write_text((GOLDEN / f"{name}.in.py").read_text())
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1", "TMPDIR": str(tmp_path)}
    command = [sys.executable, "-m", "migrator", "verify", str(script), "--format", "json"]
    done = subprocess.run(command, cwd=tmp_path, env=env, capture_output=True, text=True,
                          timeout=300, check=False)  # fmt: skip
    report = json.loads(done.stdout)
    assert report["verdict"] == "EQUIVALENT", done.stdout[-3000:] + done.stderr[-3000:]
    return report
