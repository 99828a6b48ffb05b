"""Notebooks: code cells are one program; only their sources change; the JSON layout, outputs,
metadata, markdown and raw cells, and IPython syntax are kept; findings and diffs name cells."""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys

import pytest
from bulk_support import REPO, TRAIN_SCRIPT, run_migrate

from migrator.engine import Options
from migrator.notebook import migrate_notebook
from migrator.notebook.magics import Masker, is_ipython_line
from migrator.notebook.program import CodeCell, Program
from tests.fixtures import without_batch_note, without_padding_note

NOTEBOOKS = REPO / "fixtures" / "notebooks"
GOLDEN = sorted(NOTEBOOKS.glob("*.in.ipynb"))
CLASSIFIER = NOTEBOOKS / "synthetic_classifier.in.ipynb"


def _notebook(*cells, **top) -> dict:
    """A notebook of ("code" | "markdown" | "raw", source) cells."""
    built = []
    for kind, source in cells:
        cell = {"cell_type": kind, "metadata": {}, "source": source}
        if kind == "code":
            cell.update(execution_count=None, outputs=[])
        built.append(cell)
    return {"cells": built, "metadata": {}, "nbformat": 4, "nbformat_minor": 5, **top}


def _jupyter(document: dict) -> str:
    """As Jupyter writes a notebook."""
    return json.dumps(document, sort_keys=True, indent=1, ensure_ascii=False) + "\n"


def _lines(text: str) -> list[str]:
    return text.splitlines(keepends=True)


def _code_sources(document: dict) -> list[str]:
    return [
        "".join(cell["source"]) if isinstance(cell["source"], list) else cell["source"]
        for cell in document["cells"]
        if cell["cell_type"] == "code"
    ]


@pytest.mark.parametrize("path", GOLDEN, ids=lambda p: p.name.removesuffix(".in.ipynb"))
def test_golden_notebooks(path, update_golden):
    expected_path = path.with_name(path.name.replace(".in.ipynb", ".out.ipynb"))
    result = migrate_notebook(path.read_bytes(), path.name, Options())
    assert result.error is None
    assert without_batch_note(without_padding_note(result.findings)) == []
    if update_golden:
        expected_path.write_bytes(result.migrated)
    assert result.migrated == expected_path.read_bytes()
    again = migrate_notebook(result.migrated, path.name, Options())
    assert again.error is None and not again.changed  # idempotent


@pytest.mark.parametrize("path", GOLDEN, ids=lambda p: p.name.removesuffix(".in.ipynb"))
def test_only_code_cell_sources_change(path):
    before = json.loads(path.read_bytes())
    after = json.loads(migrate_notebook(path.read_bytes(), path.name, Options()).migrated)
    assert len(after["cells"]) == len(before["cells"])
    for old, new in zip(before["cells"], after["cells"]):
        if old["cell_type"] == "code":
            old, new = dict(old), dict(new)
            old.pop("source"), new.pop("source")
        assert new == old  # markdown, raw, outputs, execution counts, ids, cell metadata
    before.pop("cells"), after.pop("cells")
    assert after == before  # nbformat, nbformat_minor, metadata


LAYOUTS = {
    "jupyter": {"indent": 1, "sort_keys": True, "ensure_ascii": False},
    "two spaces": {"indent": 2},
    "tabs": {"indent": "\t"},
    "one line": {},
    "ascii escapes": {"indent": 1, "ensure_ascii": True},
}


@pytest.mark.parametrize("newline", ["\n", ""], ids=["trailing newline", "no newline"])
@pytest.mark.parametrize("layout", LAYOUTS, ids=list(LAYOUTS))
def test_the_json_layout_is_kept(layout, newline):
    """Written with these json.dumps settings, the migrated notebook is exactly what the same
    settings write for the migrated content: indentation, key order, escapes, final newline."""
    document = json.loads(CLASSIFIER.read_bytes())
    document["cells"][1]["source"] = "".join(document["cells"][1]["source"])  # one string
    document["metadata"]["title"] = "café ☕"
    text = json.dumps(document, **LAYOUTS[layout]) + newline
    result = migrate_notebook(text.encode(), "nb.ipynb", Options())
    migrated = json.loads(result.migrated)
    assert isinstance(migrated["cells"][1]["source"], str)
    assert result.migrated.decode() == json.dumps(migrated, **LAYOUTS[layout]) + newline


def test_diff_names_cells_and_exits_one(tmp_path):
    notebook = tmp_path / "nb.ipynb"
    notebook.write_bytes(CLASSIFIER.read_bytes())
    done = run_migrate("--diff", "nb.ipynb", cwd=tmp_path)
    assert done.returncode == 1
    diff = done.stdout.decode()
    assert "--- nb.ipynb:cell 7\n+++ nb.ipynb:cell 7\n" in diff
    assert "-        loss.backward()\n+        accelerator.backward(loss)\n" in diff
    assert notebook.read_bytes() == CLASSIFIER.read_bytes()


def test_write_then_check_passes_and_the_notebook_stays_valid(tmp_path):
    notebook = tmp_path / "nb.ipynb"
    notebook.write_bytes(CLASSIFIER.read_bytes())
    assert run_migrate("--write", "nb.ipynb", cwd=tmp_path).returncode == 0
    expected = NOTEBOOKS / "synthetic_classifier.out.ipynb"
    assert notebook.read_bytes() == expected.read_bytes()
    assert json.loads(notebook.read_bytes())["nbformat"] == 4
    done = run_migrate("--check", "nb.ipynb", cwd=tmp_path)
    assert done.returncode == 0, done.stderr


def test_bulk_runs_include_notebooks(tmp_path):
    (tmp_path / "train.py").write_text(TRAIN_SCRIPT)
    (tmp_path / "nb.ipynb").write_bytes(CLASSIFIER.read_bytes())
    (tmp_path / ".ipynb_checkpoints").mkdir()
    (tmp_path / ".ipynb_checkpoints" / "nb-checkpoint.ipynb").write_bytes(CLASSIFIER.read_bytes())
    done = run_migrate("--check", ".", cwd=tmp_path)
    assert done.returncode == 1
    lines = done.stderr.decode().splitlines()
    assert lines.index("would migrate nb.ipynb") < lines.index("would migrate train.py")
    assert b"2 files scanned" in done.stderr


def test_findings_name_the_cell(tmp_path):
    document = _notebook(
        ("code", "import torch\n"),
        ("markdown", "A step outside any loop over a loader:"),
        ("code", ["loss = model(x).sum()\n", "loss.backward()\n", "optimizer.step()"]),
    )
    (tmp_path / "nb.ipynb").write_text(_jupyter(document))
    done = run_migrate("--check", "nb.ipynb", cwd=tmp_path)
    assert b"nb.ipynb:cell 3:2:1: MIG905 (note)" in done.stderr
    done = run_migrate("--check", "--format", "json", "nb.ipynb", cwd=tmp_path)
    (finding,) = json.loads(done.stdout)["files"][0]["findings"]
    assert (finding["cell"], finding["line"], finding["col"]) == (3, 2, 1)


def test_an_unparsable_cell_is_an_error_naming_it_and_other_files_go_on(tmp_path):
    document = _notebook(("code", "import torch\n"), ("code", "for x in loader\n    pass\n"))
    (tmp_path / "bad.ipynb").write_text(_jupyter(document))
    (tmp_path / "train.py").write_text(TRAIN_SCRIPT)
    done = run_migrate("--check", ".", cwd=tmp_path)
    assert done.returncode == 2
    errors = [line for line in done.stderr.decode().splitlines() if "error" in line]
    assert errors[0].startswith("bad.ipynb: error: cannot parse cell 2: ")
    assert "(line 1, column" in errors[0]
    assert b"would migrate train.py" in done.stderr


@pytest.mark.parametrize(
    "content, cause",
    [
        (b"{not json", "invalid JSON"),
        (b'{"cells": [], "nbformat": 3}', "nbformat 3"),
        (b'{"worksheets": []}', "no list of cells"),
        (b"\xff\xfe{}", "invalid JSON (not UTF-8"),
    ],
)
def test_a_broken_notebook_is_one_error_line(tmp_path, content, cause):
    (tmp_path / "nb.ipynb").write_bytes(content)
    done = run_migrate("--check", "nb.ipynb", cwd=tmp_path)
    assert done.returncode == 2
    assert done.stderr.decode().startswith(f"nb.ipynb: error: cannot read notebook: {cause}")


def test_a_notebook_in_another_language_is_skipped_with_a_note(tmp_path):
    metadata = {"kernelspec": {"language": "R", "name": "ir", "display_name": "R"}}
    document = _notebook(("code", "model <- lm(y ~ x)\n"), metadata=metadata)
    (tmp_path / "analysis.ipynb").write_text(_jupyter(document))
    done = run_migrate("--check", "analysis.ipynb", cwd=tmp_path)
    assert done.returncode == 0
    assert b"analysis.ipynb: a R notebook, not Python; skipped" in done.stderr


@pytest.mark.parametrize("language", ["Python", "python3"])
def test_python_kernels_by_any_spelling_are_migrated(language):
    document = json.loads(CLASSIFIER.read_bytes())
    document["metadata"]["kernelspec"]["language"] = language
    result = migrate_notebook(_jupyter(document).encode(), "nb.ipynb", Options())
    assert result.changed and result.note is None


def test_stdin_with_a_notebook_name(tmp_path):
    done = run_migrate(
        "--stdin-filename", "nb.ipynb", "-", cwd=tmp_path, stdin=CLASSIFIER.read_bytes()
    )
    assert done.returncode == 0
    assert done.stdout == (NOTEBOOKS / "synthetic_classifier.out.ipynb").read_bytes()


def test_the_cache_serves_notebooks(tmp_path):
    (tmp_path / "nb.ipynb").write_bytes(CLASSIFIER.read_bytes())
    flags = ("--format", "json", "--cache-dir", str(tmp_path / "cache"))
    first, second = (run_migrate("--diff", *flags, "nb.ipynb", cwd=tmp_path) for _ in range(2))
    first, second = json.loads(first.stdout), json.loads(second.stdout)
    assert (first["summary"]["cached"], second["summary"]["cached"]) == (0, 1)
    assert first["files"] == second["files"] and "nb.ipynb:cell 7" in first["files"][0]["diff"]


# -- IPython syntax ------------------------------------------------------------------------
@pytest.mark.parametrize(
    "line",
    [
        "%matplotlib inline",
        "!pip install -q torch",
        "files = !ls",
        "a, b = %timeit -o f()",
        "model.fit?",
        "?model",
        "nn.Linear??",
        "pip install torch",
        "cd ..",
        "    %time f(x)",
    ],
)
def test_ipython_lines(line):
    assert is_ipython_line(line)


@pytest.mark.parametrize(
    "line",
    [
        "import torch",
        "x = y % 3",
        "run = (",
        "env = dict(os.environ)",
        "time.sleep(1)",
        "ls",  # a name: Python
        "ls -l",  # also Python (a subtraction): kept as code, harmless
        "print('what?')",
        "x = 1  # why?",
        "# %matplotlib in a comment",
        "a != b",
    ],
)
def test_python_lines(line):
    assert not is_ipython_line(line)


def test_masked_cells_restore_byte_for_byte():
    source = (
        "%matplotlib inline\n"
        "import torch\n"
        "!pip install a \\\n"
        "    b\n"
        "x = (7\n"
        "% 2)\n"  # inside brackets: the modulo operator
        "s = '''\n"
        "%not a magic: inside a string\n"
        "'''\n"
        "for i in range(3):\n"
        "    %time f(i)\n"
        "    %timeit f(i)\n"
        "model?"
    )
    masker = Masker()
    masked = masker.mask(source)
    assert "x = (7\n% 2)\n" in masked and "%not a magic" in masked
    assert "import __migrate_magic_0__\nimport torch\n" in masked  # among the leading imports
    assert "    f(i)  # __migrate_time_3__\n" in masked  # a timed statement is analysed
    assert "    __migrate_magic_4__\n" in masked  # elsewhere a bare name
    compile(masked, "cell", "exec")
    restored = "".join(masker.restore(line)[0] for line in _lines(masked))
    assert restored == source


def test_a_cell_magic_hides_its_cell_except_time_and_capture():
    masker = Masker()
    bash = masker.mask("%%bash\necho hi\n\n  ls\n")
    assert "echo" not in bash and bash.count("\n") == 4
    timed = masker.mask("%%time\nfor x in y:\n    loss.backward()\n")
    assert timed.splitlines()[1:] == ["for x in y:", "    loss.backward()"]


def test_a_re_indented_magic_moves_with_its_block():
    masker = Masker()
    masked = masker.mask("for b in loader:\n    %time step(b)\n")
    placeholder = masked.splitlines()[1].strip()
    restored, _ = masker.restore(f"        {placeholder}\n")
    assert restored == "        %time step(b)\n"


# -- mapping the migrated program back to cells ------------------------------------------------
def _program(*sources: str) -> Program:
    cells = [CodeCell(number, source, as_list=True) for number, source in enumerate(sources, 1)]
    masker = Masker()
    for cell in cells:
        cell.masked = masker.mask(cell.source)
    return Program(cells, masker)


def test_lines_inserted_at_a_boundary_end_the_earlier_cell():
    program = _program("import torch", "device = 'cpu'\nmodel = Net()")
    migrated = "import torch\nfrom runtime import Accelerator\n\nmodel = Net()\n"
    assert program.split(migrated) == {
        1: "import torch\nfrom runtime import Accelerator\n",
        2: "model = Net()",
    }


def test_a_rewritten_line_stays_in_its_cell_and_a_cell_may_empty():
    program = _program("model = Net()\nmodel.to(device)", "loss.backward()\n", "x = 1")
    migrated = "model = Net()\naccelerator.backward(loss)\nx = 1\n"
    assert program.split(migrated) == {
        1: "model = Net()",
        2: "accelerator.backward(loss)\n",
        3: "x = 1",
    }


def test_a_lost_magic_is_an_internal_error_not_a_silent_loss():
    from migrator.notebook.program import NotebookError

    program = _program("%matplotlib inline\nimport torch")
    with pytest.raises(NotebookError, match="magic line was lost"):
        program.split("import torch\n")


# -- a migrated notebook runs ------------------------------------------------------------------
def test_the_migrated_notebook_runs_on_one_and_two_processes(tmp_path):
    """The golden output's code cells, top to bottom as one script, train on 1 process and
    under `migrate launch --nproc 2`; accelerator.print prints once."""
    document = json.loads((NOTEBOOKS / "synthetic_classifier.out.ipynb").read_bytes())
    script = tmp_path / "notebook.py"
    script.write_text("\n".join(_code_sources(document)) + "\n")
    env = {**os.environ, "PYTHONPATH": str(REPO), "OMP_NUM_THREADS": "1"}
    env.pop("WORLD_SIZE", None)
    launch = [sys.executable, "-m", "migrator", "launch", "--nproc", "2", str(script)]
    for command in ([sys.executable, str(script)], launch):
        done = subprocess.run(
            command, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300, check=False
        )
        assert done.returncode == 0, done.stderr[-3000:]
        assert done.stdout.count("epoch 1: loss") == 1 and done.stdout.count("saved") == 1
        assert (tmp_path / "classifier.pt").exists()
        (tmp_path / "classifier.pt").unlink()


TRAINING_CELL = """\
import torch
from torch.utils.data import DataLoader, TensorDataset

model = torch.nn.Linear(4, 1)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
loader = DataLoader(TensorDataset(torch.randn(32, 4), torch.randn(32, 1)), batch_size=8)
for epoch in range(2):
    for x, y in loader:
        loss = torch.nn.functional.mse_loss(model(x), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
"""


@pytest.mark.parametrize(
    "indented",
    [
        " count = sum(p.numel() for p in model.parameters())",  # a stray space, pasted
        "\tfor p in model.parameters():\n\t    p.requires_grad_(False)\n\n\tdone = True\n",
        "    x = 1\n  \n    if x:\n        y = x + 1",  # a whitespace-only line kept as it is
        # lines without the first line's indent stay as they are (IPython takes it off only
        # the lines that start with it): a Colab mount pasted with a stray indent
        "  from os import path\nroot = path.join('/content', 'drive')\n",
        "\t\tx = 1\n\t\ty = [x,\n  x]\nz = y\n",
    ],
)
def test_a_cell_ipython_dedents_is_read_and_kept_byte_for_byte(indented):
    """IPython takes the first line's indent off every line of a cell before compiling it
    (`leading_indent`): such a cell runs in Jupyter, and is read so here; left unedited, its
    bytes do not change."""
    document = _notebook(("code", TRAINING_CELL), ("code", indented))
    result = migrate_notebook(_jupyter(document).encode(), "nb.ipynb", Options())
    assert result.error is None, result.error
    assert result.changed
    sources = _code_sources(json.loads(result.migrated))
    assert "accelerator.backward(loss)" in sources[0]
    assert sources[1] == indented


def test_an_edited_indented_cell_keeps_its_indent():
    """The training loop itself in an indented cell: its edits carry the cell's indent."""
    indented = "".join(f"  {line}" if line.strip() else line for line in _lines(TRAINING_CELL))
    document = _notebook(("code", indented))
    result = migrate_notebook(_jupyter(document).encode(), "nb.ipynb", Options())
    assert result.error is None, result.error
    (source,) = _code_sources(json.loads(result.migrated))
    assert "  accelerator.backward(loss)" in source
    assert all(line.startswith("  ") for line in _lines(source) if line.strip())
    again = migrate_notebook(result.migrated, "nb.ipynb", Options())
    assert again.error is None and not again.changed  # idempotent


def test_a_cell_that_does_not_parse_even_dedented_is_still_one_clear_error():
    # IPython takes "  " off both lines: "x = 1\n  y = 2" is an unexpected indent there too
    document = _notebook(("code", TRAINING_CELL), ("code", "  x = 1\n    y = 2\n"))
    result = migrate_notebook(_jupyter(document).encode(), "nb.ipynb", Options())
    assert result.error is not None and "cannot parse cell 2" in result.error


def test_an_edited_cell_with_lines_ipython_does_not_dedent_runs_alike():
    """The training loop in a cell whose first line is indented and the others are not: the
    edited cell carries the indent on every line, which IPython takes off again."""
    cell = "  import torch\n" + TRAINING_CELL.split("\n", 1)[1]
    document = _notebook(("code", cell))
    result = migrate_notebook(_jupyter(document).encode(), "nb.ipynb", Options())
    assert result.error is None, result.error
    (source,) = _code_sources(json.loads(result.migrated))
    assert "  accelerator.backward(loss)" in source
    lines = [line for line in _lines(source) if line.strip()]
    assert all(line.startswith("  ") for line in lines)
    ast.parse("".join(line[2:] if line.strip() else line for line in _lines(source)))


TIMED_TRAINING = """\
import torch
from torch.utils.data import DataLoader, TensorDataset

model = torch.nn.Linear(4, 1)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
loader = DataLoader(TensorDataset(torch.randn(32, 4), torch.randn(32, 1)), batch_size=8)


def train(loader, epochs):
    for epoch in range(epochs):
        for x, y in loader:
            loss = torch.nn.functional.mse_loss(model(x), y)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
"""


def test_a_timed_statement_is_analysed_and_keeps_its_time_magic():
    """`%time train(loader, 2)` runs the statement once in the notebook's namespace: the
    analysis sees the call (the loader it passes is prepared), and the line keeps `%time`."""
    document = _notebook(("code", TIMED_TRAINING), ("code", "%time train(loader, 2)\nprint(1)"))
    result = migrate_notebook(_jupyter(document).encode(), "nb.ipynb", Options())
    assert result.error is None, result.error
    first, second = _code_sources(json.loads(result.migrated))
    assert "accelerator.prepare(model, optimizer, loader)" in first
    assert second == "%time train(loader, 2)\naccelerator.print(1)"
    again = migrate_notebook(result.migrated, "nb.ipynb", Options())
    assert again.error is None and not again.changed  # idempotent


@pytest.mark.parametrize(
    "line", ["%timeit train(loader, 2)", "%time train(loader, 2)  # two epochs", "%time"]
)
def test_other_timing_lines_stay_hidden(line):
    """`%timeit` runs its statement many times, a commented or empty one is not read: they
    stay magics, restored as they were."""
    masker = Masker()
    masked = masker.mask(line + "\n")
    assert "__migrate_magic_" in masked and "train(" not in masked
    assert masker.restore(masked) == (line + "\n", 0)
