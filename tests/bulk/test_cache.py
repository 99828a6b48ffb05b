"""The verdict cache: a warm run answers without the engine; content, options, the tool's
version and code invalidate it; --no-cache writes nothing; a bad or unwritable cache never
fails a run."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from bulk_support import REPO, TRAIN_SCRIPT, run_migrate

from migrator import cache as cache_module
from migrator import runner
from migrator.cache import (
    VerdictCache,
    cache_directory,
    cacheable,
    code_fingerprint,
    entry_key,
    open_cache,
    prune,
)
from migrator.engine import FileResult, Options
from migrator.runner import run_files

NOT_TRAINING = "def add(a, b):\n    return a + b\n"
FRAGMENT = "loss = model(x).sum()\nloss.backward()\noptimizer.step()\n"  # a MIG905 note


def _project(tree):
    return tree(
        {
            "train.py": TRAIN_SCRIPT,
            "util.py": NOT_TRAINING,
            "fragment.py": FRAGMENT,
            "broken.py": TRAIN_SCRIPT.replace("def main():", "def main(:"),
        }
    )


def _summary(root: Path, *args: str) -> tuple[dict, dict]:
    """(JSON summary, {path: file entry}) of `migrate --check --format json ARGS .`."""
    done = run_migrate("--check", "--format", "json", *args, ".", cwd=root)
    payload = json.loads(done.stdout)
    return payload["summary"], {entry["path"]: entry for entry in payload["files"]}


def _verdicts(results) -> list[tuple]:
    return sorted(
        (r.path, r.migrated, r.skipped, r.error, [f.to_json() for f in r.findings]) for r in results
    )


def _no_engine(*args, **kwargs):
    raise AssertionError("the engine ran on a cached file")


def test_a_warm_run_gives_the_same_results_without_calling_the_engine(tree, tmp_path, monkeypatch):
    root = _project(tree)
    paths = sorted(root.glob("*.py"))
    cache = open_cache(tmp_path / "cache", Options())
    cold = run_files(paths, Options(), jobs=1, cache=cache)
    assert cold.cached == 0
    monkeypatch.setattr(runner, "migrate_file", _no_engine)
    monkeypatch.setattr(runner, "migrate_bytes", _no_engine)
    warm = run_files(paths, Options(), jobs=1, cache=cache)
    assert warm.cached == 4  # train, fragment, broken by entry; util.py by the prefilter index
    assert _verdicts(warm.results) == _verdicts(cold.results)
    changed = [r for r in warm.results if r.changed]
    assert [r.path for r in changed] == [str(root / "train.py")]
    assert changed[0].source == TRAIN_SCRIPT.encode()  # the bytes just read, for --write


def _reads(monkeypatch) -> list[str]:
    """The names of the files `run_files` reads from now on."""
    read: list[str] = []
    real = runner.read_and_prefilter

    def recording(path, options):
        read.append(Path(path).name)
        return real(path, options)

    monkeypatch.setattr(runner, "read_and_prefilter", recording)
    return read


def test_files_the_prefilter_rejected_are_not_read_again_until_they_change(
    tree, tmp_path, monkeypatch
):
    root = tree({"util.py": NOT_TRAINING, "other.py": NOT_TRAINING + "# other\n"})
    paths = sorted(root.glob("*.py"))
    cache = open_cache(tmp_path / "cache", Options())
    cold = run_files(paths, Options(), jobs=1, cache=cache)
    assert cold.cached == 0 and all(r.skipped for r in cold.results)
    read = _reads(monkeypatch)
    warm = run_files(paths, Options(), jobs=1, cache=cache)
    assert read == [] and warm.cached == 2
    assert _verdicts(warm.results) == _verdicts(cold.results)
    # grown into a training script: size and mtime differ, so it is read and migrated
    (root / "util.py").write_text(TRAIN_SCRIPT)
    again = run_files(paths, Options(), jobs=1, cache=cache)
    assert read == ["util.py"] and again.cached == 1
    (migrated,) = [r for r in again.results if r.path.endswith("util.py")]
    assert migrated.changed
    # the same size, another mtime: read again (and still rejected)
    os.utime(root / "other.py", ns=(1, 1))
    read.clear()
    run_files(paths, Options(), jobs=1, cache=cache)
    assert read == ["other.py", "util.py"]  # a candidate is always read: its entry is its bytes
    read.clear()
    run_files(paths, Options(), jobs=1, cache=cache)
    assert read == ["util.py"]


def test_a_damaged_prefilter_index_is_an_empty_one(tree, tmp_path, monkeypatch):
    root = tree({"util.py": NOT_TRAINING})
    paths = [root / "util.py"]
    cache = open_cache(tmp_path / "cache", Options())
    run_files(paths, Options(), jobs=1, cache=cache)
    index = cache.directory / cache_module.PREFILTERED
    index.write_bytes(index.read_bytes().replace(b"util.py", b"util.px"))
    read = _reads(monkeypatch)
    again = run_files(paths, Options(), jobs=1, cache=cache)
    assert read == ["util.py"] and again.cached == 0 and again.results[0].skipped
    assert cache.load_prefiltered() == {str(paths[0]): _size_and_mtime(paths[0])}


def _size_and_mtime(path: Path) -> tuple[int, int]:
    stat = path.stat()
    return stat.st_size, stat.st_mtime_ns


def test_workers_of_a_pool_write_entries_a_later_run_reads(tree, tmp_path):
    files = {f"train_{i}.py": TRAIN_SCRIPT + f"\n# copy {i}\n" for i in range(4)}
    root = tree(files)
    paths = sorted(root.glob("*.py"))
    cache = open_cache(tmp_path / "cache", Options())
    cold = run_files(paths, Options(), jobs=2, cache=cache)
    warm = run_files(paths, Options(), jobs=2, cache=cache)
    assert (cold.cached, warm.cached) == (0, 4)
    assert _verdicts(warm.results) == _verdicts(cold.results)


def test_the_command_line_reports_cached_files_and_the_same_output(tree, tmp_path):
    root = _project(tree)
    flags = ("--cache-dir", str(tmp_path / "cache"))
    cold_summary, cold_files = _summary(root, *flags)
    warm_summary, warm_files = _summary(root, *flags)
    assert (cold_summary["cached"], warm_summary["cached"]) == (0, 4)
    assert warm_files == cold_files
    diffs = [run_migrate("--diff", *flags, "train.py", cwd=root).stdout for _ in range(2)]
    assert diffs[0] == diffs[1] and b"+            accelerator.backward(loss)" in diffs[0]


def test_write_is_served_from_the_cache_and_still_checks_the_current_bytes(tree, tmp_path):
    root = tree({"train.py": TRAIN_SCRIPT})
    flags = ("--cache-dir", str(tmp_path / "cache"))
    run_migrate("--check", *flags, "train.py", cwd=root)
    done = run_migrate("--write", "--format", "json", *flags, "train.py", cwd=root)
    assert json.loads(done.stdout)["summary"]["cached"] == 1
    assert "accelerator.backward(loss)" in (root / "train.py").read_text()
    done = run_migrate("--check", *flags, "train.py", cwd=root)
    assert done.returncode == 0  # the migrated file: a new content, checked afresh


def test_changed_content_is_a_miss(tree, tmp_path):
    root = tree({"train.py": TRAIN_SCRIPT})
    flags = ("--cache-dir", str(tmp_path / "cache"))
    _summary(root, *flags)
    (root / "train.py").write_text(TRAIN_SCRIPT.replace("loss.backward()", "loss.backward() "))
    summary, files = _summary(root, *flags)
    assert summary["cached"] == 0 and files["train.py"]["status"] == "would-migrate"


def test_options_are_part_of_the_key(tree, tmp_path):
    root = tree({"train.py": TRAIN_SCRIPT})
    flags = ("--cache-dir", str(tmp_path / "cache"))
    run_migrate("--diff", *flags, "train.py", cwd=root)
    done = run_migrate("--diff", "--target", "accelerate", *flags, "train.py", cwd=root)
    assert b"+from accelerate import Accelerator" in done.stdout
    summary, _ = _summary(root, "--ignore", "MIG005", *flags)
    assert summary["cached"] == 0


def test_version_and_code_fingerprint_are_part_of_the_key(tree, tmp_path, monkeypatch):
    root = tree({"train.py": TRAIN_SCRIPT})
    paths = [root / "train.py"]
    run_files(paths, Options(), jobs=1, cache=open_cache(tmp_path / "cache", Options()))
    assert run_files(
        paths, Options(), jobs=1, cache=open_cache(tmp_path / "cache", Options())
    ).cached
    monkeypatch.setattr(cache_module, "__version__", "99.0")
    assert not run_files(
        paths, Options(), jobs=1, cache=open_cache(tmp_path / "cache", Options())
    ).cached
    monkeypatch.undo()
    monkeypatch.setattr(cache_module, "code_fingerprint", lambda: "edited")
    assert not run_files(
        paths, Options(), jobs=1, cache=open_cache(tmp_path / "cache", Options())
    ).cached


def test_editing_or_touching_migrator_sources_changes_the_fingerprint(tmp_path):
    package = tmp_path / "migrator"
    shutil.copytree(REPO / "migrator", package, ignore=shutil.ignore_patterns("__pycache__"))
    before = code_fingerprint(package)
    assert code_fingerprint(package) == before
    rule = package / "rules" / "mig005_backward.py"
    stat = rule.stat()
    os.utime(rule, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000_000))
    touched = code_fingerprint(package)
    assert touched != before
    rule.write_text(rule.read_text() + "\n")
    os.utime(rule, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000_000))
    assert code_fingerprint(package) not in (before, touched)


def test_no_cache_neither_reads_nor_writes(tree, tmp_path):
    root = tree({"train.py": TRAIN_SCRIPT})
    cache_dir = tmp_path / "cache"
    done = run_migrate("--check", "--no-cache", "--cache-dir", str(cache_dir), ".", cwd=root)
    assert done.returncode == 1 and not cache_dir.exists()
    _summary(root, "--cache-dir", str(cache_dir))
    summary, _ = _summary(root, "--no-cache", "--cache-dir", str(cache_dir))
    assert summary["cached"] == 0


def test_an_unwritable_cache_directory_never_fails_a_run(tree, tmp_path):
    root = tree({"train.py": TRAIN_SCRIPT, "util.py": NOT_TRAINING})
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    unwritable = blocker / "cache"  # below a regular file: cannot be created, even by root
    done = run_migrate("--check", "--cache-dir", str(unwritable), ".", cwd=root)
    assert done.returncode == 1
    assert b"would migrate train.py" in done.stderr
    assert done.stderr.count(b"warning: cache directory") == 1
    quiet = run_migrate("--check", "--quiet", "--cache-dir", str(unwritable), ".", cwd=root)
    # no cache warning: the script's global batch note is all it prints
    [line] = quiet.stderr.decode().splitlines()
    assert quiet.returncode == 1 and line.startswith("train.py:") and "global batch" in line


def test_a_missing_cache_directory_is_created_with_its_gitignore(tree, tmp_path):
    root = tree({"train.py": TRAIN_SCRIPT})
    cache_dir = tmp_path / "deep" / "er" / "cache"
    run_migrate("--check", "--cache-dir", str(cache_dir), ".", cwd=root)
    assert (cache_dir / ".gitignore").read_text().splitlines()[-1] == "*"
    assert (cache_dir / "CACHEDIR.TAG").read_bytes().startswith(b"Signature: 8a477f597d28d172")


@pytest.mark.parametrize(
    "damage",
    [
        lambda data: b"garbage",
        lambda data: data[: len(data) // 2],  # truncated
        lambda data: data.replace(b'"skipped": false', b'"skipped": true'),
        lambda data: data[:-3] + b"xyz",  # migrated bytes damaged
        lambda data: b"",
    ],
)
def test_corrupt_entries_are_misses_not_errors(tree, tmp_path, damage):
    root = tree({"train.py": TRAIN_SCRIPT})
    paths = [root / "train.py"]
    cache = open_cache(tmp_path / "cache", Options())
    cold = run_files(paths, Options(), jobs=1, cache=cache)
    (entry,) = cache.directory.iterdir()
    entry.write_bytes(damage(entry.read_bytes()))
    again = run_files(paths, Options(), jobs=1, cache=cache)
    assert again.cached == 0 and _verdicts(again.results) == _verdicts(cold.results)


def test_unreadable_entries_are_misses(tmp_path):
    cache = VerdictCache(tmp_path, "env")
    (tmp_path / "directory-entry").mkdir()
    assert cache.load("directory-entry", "t.py", b"a", "python") is None
    assert cache.load("missing", "t.py", b"a", "python") is None


def test_a_foreign_entry_is_a_miss(tree, tmp_path):
    """An entry copied under another file's name (or from another environment) is ignored."""
    root = tree({"a.py": TRAIN_SCRIPT, "b.py": FRAGMENT})
    paths = sorted(root.glob("*.py"))
    cache = open_cache(tmp_path / "cache", Options())
    cold = run_files(paths, Options(), jobs=1, cache=cache)
    entries = sorted(cache.directory.iterdir())
    assert len(entries) == 2
    first, second = (entry.read_bytes() for entry in entries)
    entries[0].write_bytes(second)
    entries[1].write_bytes(first)
    again = run_files(paths, Options(), jobs=1, cache=cache)
    assert again.cached == 0 and _verdicts(again.results) == _verdicts(cold.results)
    other = open_cache(tmp_path / "cache", Options(target="accelerate"))
    for entry in entries:  # another environment's entries under this environment's names
        (other.directory / entry.name).write_bytes(entry.read_bytes())
    assert run_files(paths, Options(target="accelerate"), jobs=1, cache=other).cached == 0


def test_concurrent_runs_share_one_cache(tree, tmp_path):
    files = {f"train_{i}.py": TRAIN_SCRIPT + f"\n# copy {i}\n" for i in range(6)}
    root = tree(files)
    command = [sys.executable, "-m", "migrator", "--check", "--quiet", "-j", "2"]
    command += ["--cache-dir", str(tmp_path / "cache"), "."]
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    runs = [subprocess.Popen(command, cwd=root, env=env) for _ in range(3)]
    assert [run.wait(timeout=300) for run in runs] == [1, 1, 1]
    assert not list((tmp_path / "cache").rglob("*-tmp"))
    summary, _ = _summary(root, "--cache-dir", str(tmp_path / "cache"))
    assert summary["cached"] == 6


def test_default_location_is_the_project_root_and_config_and_flags_move_it(tree):
    root = tree(
        {
            "pyproject.toml": "[tool.migrate]\n",
            "src/train.py": TRAIN_SCRIPT,
            "other/pyproject.toml": '[tool.migrate]\ncache-dir = "../shared-cache"\n',
            "other/train.py": TRAIN_SCRIPT,
        }
    )
    without_env = {"MIGRATE_CACHE_DIR": None}
    run_migrate("--check", "train.py", cwd=root / "src", env=without_env)
    assert (root / ".migrate_cache" / ".gitignore").exists()
    assert not (root / "src" / ".migrate_cache").exists()
    run_migrate("--check", "train.py", cwd=root / "other", env=without_env)
    assert (root / "shared-cache" / ".gitignore").exists()
    run_migrate("--check", "train.py", cwd=root / "other", env={"MIGRATE_CACHE_DIR": "from-env"})
    assert (root / "other" / "from-env" / ".gitignore").exists()
    run_migrate("--check", "--cache-dir", "flag", "train.py", cwd=root / "other")
    assert (root / "other" / "flag" / ".gitignore").exists()
    # the cache directory itself is never walked
    (root / ".migrate_cache" / "stray.py").write_text(TRAIN_SCRIPT)
    done = run_migrate("--check", "--format", "json", ".", cwd=root, env=without_env)
    assert ".migrate_cache" not in done.stdout.decode()


def test_cache_directory_precedence(tmp_path, monkeypatch):
    monkeypatch.delenv("MIGRATE_CACHE_DIR", raising=False)
    assert cache_directory(None, None, tmp_path) == tmp_path / ".migrate_cache"
    assert cache_directory(None, tmp_path / "conf", tmp_path) == tmp_path / "conf"
    monkeypatch.setenv("MIGRATE_CACHE_DIR", str(tmp_path / "env"))
    assert cache_directory(None, tmp_path / "conf", tmp_path) == tmp_path / "env"
    assert cache_directory("flag", tmp_path / "conf", tmp_path) == Path("flag")


def test_internal_errors_are_not_cached():
    assert cacheable(FileResult(path="a", source=b"", error="cannot parse: x (line 1, column 2)"))
    assert not cacheable(FileResult(path="a", source=b"", error="internal error: worker died"))
    assert cacheable(FileResult(path="a", source=b""))


def test_dependencies_extend_the_key_without_changing_files_that_have_none():
    data = TRAIN_SCRIPT.encode()
    base = entry_key("python", data)
    assert entry_key("python", data, ()) == base
    assert entry_key("notebook", data) != base
    one = entry_key("python", data, [("lib.py", b"\x01" * 32)])
    assert one != base
    both = [("lib.py", b"\x01" * 32), ("model.py", b"\x02" * 32)]
    assert entry_key("python", data, both) == entry_key("python", data, both[::-1])


def test_unused_environments_are_pruned(tmp_path):
    current = open_cache(tmp_path, Options())
    old = tmp_path / "0.0.1" / "old-environment"
    old.mkdir(parents=True)
    (old / "entry").write_text("x")
    recent = tmp_path / current.directory.parent.name / "recent-environment"
    recent.mkdir()
    long_ago = 1_000_000_000
    os.utime(old, (long_ago, long_ago))
    prune(current)
    assert not (tmp_path / "0.0.1").exists()
    assert recent.exists() and current.directory.exists()


def test_cache_dir_in_the_configuration_is_relative_to_it_and_must_be_a_path(tmp_path):
    from migrator.config import ConfigError, parse_config

    pyproject = tmp_path / "pyproject.toml"
    pyproject.write_text('[tool.migrate]\ncache-dir = "build/cache"\n')
    assert parse_config(pyproject).cache_dir == tmp_path / "build" / "cache"
    pyproject.write_text("[tool.migrate]\ncache-dir = 3\n")
    with pytest.raises(ConfigError, match="cache-dir must be a path"):
        parse_config(pyproject)


def test_a_helper_module_the_verdict_read_is_part_of_it(tree, tmp_path):
    # train.py calls util.save(); whether that call is guarded depends on util.py's body
    script = TRAIN_SCRIPT.replace("def main():", "import util\n\n\ndef main():\n    util.save('x')")
    root = tree({"train.py": script, "util.py": "def save(path):\n    return path\n"})
    cache_dir = ["--cache-dir", str(tmp_path / "cache")]
    first, _ = _summary(root, *cache_dir)
    (root / "util.py").write_text("def save(path):\n    open(path, 'w').close()\n")
    second, _ = _summary(root, *cache_dir)
    assert second["cached"] == 0  # the helper changed: the verdict is computed again
    diff = subprocess.run(
        [sys.executable, "-m", "migrator", "--diff", "--no-cache", "train.py"],
        cwd=root, capture_output=True, text=True, check=False,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )  # fmt: skip
    assert "+    if accelerator.is_main_process:\n+        util.save('x')" in diff.stdout
    third, _ = _summary(root, *cache_dir)
    assert first["cached"] == 0 and third["cached"] == 2  # nothing changed since: both cached
