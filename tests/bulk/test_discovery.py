"""Discovery per SPEC §2: recursion, .gitignore, excludes, force-exclude, symlinks, order."""

from __future__ import annotations

import os
from pathlib import Path

from bulk_support import TRAIN_SCRIPT, run_migrate

from migrator.discovery import DiscoverySettings, discover


def _names(root: Path, paths: list[Path]) -> list[str]:
    return [Path(os.path.relpath(p, root)).as_posix() for p in paths]


def _discover(root: Path, *args: str, **settings) -> list[str]:
    old = os.getcwd()
    os.chdir(root)
    try:
        found = discover(list(args) or ["."], DiscoverySettings(root=root, **settings))
    finally:
        os.chdir(old)
    return _names(root, [root / p for p in found.files])


def test_walks_recursively_for_py_files_in_sorted_order(tree):
    root = tree({"b.py": "", "a/z.py": "", "a/y.py": "", "a/notes.txt": "", "a/c/x.pyi": ""})
    assert _discover(root) == ["a/y.py", "a/z.py", "b.py"]


def test_default_excludes(tree):
    root = tree(
        {
            "ok.py": "",
            ".venv/lib/x.py": "",
            "build/x.py": "",
            "node_modules/x.py": "",
            "pkg/__pycache__/x.py": "",
            "pkg/site-packages/x.py": "",
        }
    )
    assert _discover(root) == ["ok.py"]


def test_gitignore_nested_and_negated(tree):
    root = tree(
        {
            ".git/HEAD": "",
            ".gitignore": "generated/\n*_pb2.py\n",
            "generated/x.py": "",
            "api_pb2.py": "",
            "pkg/.gitignore": "local_*.py\n!local_keep.py\n",
            "pkg/local_a.py": "",
            "pkg/local_keep.py": "",
            "pkg/sub/local_b.py": "",
            "pkg/sub/real.py": "",
            "other/local_c.py": "",  # the nested ignore file applies below pkg/ only
        }
    )
    assert _discover(root) == ["other/local_c.py", "pkg/local_keep.py", "pkg/sub/real.py"]


def test_gitignore_above_the_walked_directory_applies(tree):
    root = tree({".git/HEAD": "", ".gitignore": "*_gen.py\n", "src/a.py": "", "src/b_gen.py": ""})
    assert _discover(root, "src") == ["src/a.py"]


def test_a_directory_named_explicitly_is_walked_even_if_ignored(tree):
    root = tree({".git/HEAD": "", ".gitignore": "vendor/\n", "vendor/lib.py": ""})
    assert _discover(root) == []
    assert _discover(root, "vendor") == ["vendor/lib.py"]


def test_exclude_replaces_defaults_and_extend_exclude_adds(tree):
    root = tree({"build/a.py": "", "legacy/b.py": "", "src/c.py": "", "src/old_d.py": ""})
    assert _discover(root, exclude=["legacy/"]) == ["build/a.py", "src/c.py", "src/old_d.py"]
    assert _discover(root, extend_exclude=["legacy/", "old_*.py"]) == ["src/c.py"]


def test_explicit_files_are_processed_unless_force_exclude(tree):
    root = tree(
        {
            ".git/HEAD": "",
            ".gitignore": "ignored.py\n",
            "build/gen.py": "",
            "ignored.py": "",
            "fine.py": "",
        }
    )
    args = ("build/gen.py", "ignored.py", "fine.py")
    assert _discover(root, *args) == ["build/gen.py", "fine.py", "ignored.py"]
    assert _discover(root, *args, force_exclude=True) == ["fine.py"]


def test_symlinks_are_not_followed_out_of_the_tree_or_round_a_loop(tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.py").write_text(TRAIN_SCRIPT)
    root = tmp_path / "repo"
    (root / "pkg").mkdir(parents=True)
    (root / "pkg" / "real.py").write_text("x = 1\n")
    os.symlink(outside, root / "pkg" / "linked_dir")
    os.symlink(outside / "secret.py", root / "pkg" / "linked.py")
    os.symlink(root / "pkg", root / "pkg" / "loop")
    os.symlink("self.py", root / "self.py")  # a link to itself
    assert _discover(root) == ["pkg/real.py"]


def test_missing_path_and_symlink_loop_are_problems(tmp_path):
    os.symlink("loop.py", tmp_path / "loop.py")
    found = discover([str(tmp_path / "missing.py"), str(tmp_path / "loop.py")])
    assert found.files == []
    causes = dict(found.problems)
    assert causes[str(tmp_path / "missing.py")] == "no such file or directory"
    assert causes[str(tmp_path / "loop.py")] == "symlink loop"


def test_walks_find_notebooks_but_not_checkpoints_or_the_cache(tree):
    root = tree(
        {
            "nb.ipynb": "{}",
            "pkg/train.py": "",
            "pkg/.ipynb_checkpoints/nb-checkpoint.ipynb": "{}",
            ".migrate_cache/0.1.0/x.py": "",
            "notes.txt": "",
        }
    )
    assert _discover(root) == ["nb.ipynb", "pkg/train.py"]
    found = discover([str(root / "nb.ipynb")])
    assert found.files == [root / "nb.ipynb"] and found.problems == []


def test_zero_files_is_exit_0_and_says_so(tmp_path):
    (tmp_path / "empty").mkdir()
    done = run_migrate("--check", "empty", cwd=tmp_path)
    assert done.returncode == 0
    assert done.stdout == b""
    done = run_migrate("--check", cwd=tmp_path)  # no paths at all (pre-commit, nothing staged)
    assert done.returncode == 0


def test_duplicates_are_processed_once(tree):
    root = tree({"pkg/a.py": ""})
    assert _discover(root, "pkg", "pkg/a.py", "./pkg") == ["pkg/a.py"]
