"""The bad-input matrix: each bad file gets one clear `path: error: cause` line, exit 2; the
other files in the same run are processed; files left alone stay byte-identical."""

from __future__ import annotations

import codecs
import hashlib
import os
from pathlib import Path

import pytest
from bulk_support import TRAIN_SCRIPT, run_migrate

GOOD = TRAIN_SCRIPT.encode()


def _generated(size: int) -> bytes:
    """A big generated module: a table and nothing else, no training code."""
    rows = (b"    %d: ('entry_%d', %d.5, [1, 2, 3]),\n" % (i, i, i) for i in range(10**7))
    body, total = [], 0
    for row in rows:
        body.append(row)
        total += len(row)
        if total >= size:
            break
    return b"# generated\nTABLE = {\n" + b"".join(body) + b"}\n"


def _matrix(root: Path) -> dict[str, bytes]:
    files = {
        "syntax_error.py": GOOD.replace(b"def main():", b"def main(:"),
        "undecodable.py": b"x = '\xff\xfe\xfa'\nloss.backward()\n",
        "binary.py": b"\x7fELF\x02\x01\x01\x00\x00\x00" + bytes(range(256)) * 8,
        "bom.py": codecs.BOM_UTF8 + GOOD,
        "crlf.py": GOOD.replace(b"\n", b"\r\n"),
        "tabs.py": GOOD.replace(b"    ", b"\t"),
        "empty.py": b"",
        "generated_5mb.py": _generated(5 * 1024 * 1024),
        "latin1.py": "# -*- coding: latin-1 -*-\n# d\xe9j\xe0 vu\nx = 1\n".encode("latin-1"),
        "readonly.py": GOOD,
        "plain.py": b"def add(a, b):\n    return a + b\n",
        "untouched_bad_syntax.py": b"def broken(:\n    pass\n",  # no training code: not parsed
    }
    for name, data in files.items():
        (root / name).write_bytes(data)
    (root / "readonly.py").chmod(0o444)
    os.symlink("loop_b.py", root / "loop_a.py")
    os.symlink("loop_a.py", root / "loop_b.py")
    return files


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.fixture
def matrix(tmp_path):
    root = tmp_path / "repo"
    root.mkdir()
    files = _matrix(root)
    yield root, files
    (root / "readonly.py").chmod(0o644)


def test_write_over_the_matrix(matrix):
    root, files = matrix
    before = {name: _digest(root / name) for name in files}
    done = run_migrate("--write", ".", "loop_a.py", cwd=root)
    err = done.stderr.decode()
    assert done.returncode == 2, err
    lines = err.splitlines()

    def error_for(name: str) -> str:
        found = [line for line in lines if line.startswith(f"{name}: error: ")]
        assert len(found) == 1, (name, err)
        return found[0]

    assert "cannot parse" in error_for("syntax_error.py")
    assert "cannot decode" in error_for("undecodable.py")
    assert "binary file" in error_for("binary.py")
    assert "read-only" in error_for("readonly.py")
    assert "symlink loop" in error_for("loop_a.py")
    # The good ones are migrated, keeping BOM and line endings.
    for name in ("bom.py", "crlf.py", "tabs.py"):
        assert b"accelerator.backward(loss)" in (root / name).read_bytes(), name
    assert (root / "bom.py").read_bytes().startswith(codecs.BOM_UTF8)
    crlf = (root / "crlf.py").read_bytes()
    assert crlf.count(b"\n") == crlf.count(b"\r\n")
    # Every file that was not migrated is byte-identical.
    for name in files:
        if name not in ("bom.py", "crlf.py", "tabs.py"):
            assert _digest(root / name) == before[name], name
    assert not [p for p in root.iterdir() if p.name.endswith(".migrate-tmp")]


def test_check_over_the_matrix_lists_the_good_ones(matrix):
    root, _ = matrix
    done = run_migrate("--check", ".", cwd=root)
    err = done.stderr.decode()
    assert done.returncode == 2
    for name in ("bom.py", "crlf.py", "tabs.py", "readonly.py"):
        assert f"would migrate {name}" in err
    assert done.stdout == b""


def test_each_error_is_one_line_naming_the_file(tmp_path):
    (tmp_path / "syntax_error.py").write_bytes(GOOD.replace(b"def main():", b"def main(:"))
    done = run_migrate("--check", "--quiet", "syntax_error.py", cwd=tmp_path)
    assert done.returncode == 2
    (line,) = done.stderr.decode().splitlines()
    assert line.startswith("syntax_error.py: error: cannot parse")


def test_missing_file_is_an_error_but_the_others_run(tmp_path):
    (tmp_path / "train.py").write_text(TRAIN_SCRIPT)
    done = run_migrate("--write", "missing.py", "train.py", cwd=tmp_path)
    assert done.returncode == 2
    assert b"missing.py: error: no such file or directory" in done.stderr
    assert "accelerator.backward" in (tmp_path / "train.py").read_text()
