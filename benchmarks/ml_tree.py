"""An ML-shaped tree, built offline and deterministically, for benchmarks/bulk.py:

    <root>/torch/...                       torch's own .py sources (a library: mostly no training)
    <root>/experiments/expNN/<name>.py     320 plain PyTorch training scripts
    <root>/accelerate_scripts/<name>.py    100 scripts already on HF Accelerate

The training scripts are copies of fixtures/golden/*.in.py and fixtures/scripts/*.py, the
Accelerate scripts copies of fixtures/golden/*.out.py with `from accelerate import
Accelerator`. Every copy differs from the others by a few small edits, the kind that separate
real repositories' copies of one script: local variables renamed (at the positions `ast`
reports, so the code stays valid), helper functions added, a header comment. Same inputs,
same tree, byte for byte.

    python benchmarks/ml_tree.py DIR     # build it (bulk.py builds one in a temp dir itself)
"""

from __future__ import annotations

import argparse
import ast
import builtins
import hashlib
import importlib.util
import os
import shutil
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "fixtures"
TRAINING_SCRIPTS = 320
ACCELERATE_SCRIPTS = 100
EXPERIMENT_FOLDERS = 16
SUFFIXES = ("v2", "main", "run", "local", "exp", "new", "cur", "tmp", "best", "base")


def torch_sources() -> Path:
    spec = importlib.util.find_spec("torch")  # finds the package without importing it
    if spec is None or spec.origin is None:
        sys.exit("torch is not installed")
    return Path(spec.origin).parent


def build(root: Path, torch_dir: Path | None = None) -> dict[str, int]:
    """Writes the tree under `root` (which must not exist); returns file counts by part."""
    torch_dir = torch_dir or torch_sources()
    root.mkdir(parents=True)
    counts = {"torch": _copy_python_files(torch_dir, root / "torch")}
    training = sorted((FIXTURES / "golden").glob("*.in.py")) + sorted(
        (FIXTURES / "scripts").glob("*.py")
    )
    for index in range(TRAINING_SCRIPTS):
        base = training[index % len(training)]
        name = base.name.removesuffix(".in.py").removesuffix(".py")
        folder = root / "experiments" / f"exp{index % EXPERIMENT_FOLDERS:02d}"
        folder.mkdir(parents=True, exist_ok=True)
        (folder / f"{name}_{index:03d}.py").write_text(variant(base.read_text(), index))
    counts["training"] = TRAINING_SCRIPTS
    accelerate = sorted((FIXTURES / "golden").glob("*.out.py"))
    folder = root / "accelerate_scripts"
    folder.mkdir()
    for index in range(ACCELERATE_SCRIPTS):
        base = accelerate[index % len(accelerate)]
        source = base.read_text().replace(
            "from runtime import Accelerator", "from accelerate import Accelerator"
        )
        name = base.name.removesuffix(".out.py")
        (folder / f"{name}_{index:03d}.py").write_text(variant(source, 1000 + index))
    counts["accelerate"] = ACCELERATE_SCRIPTS
    return counts


def variant(source: str, index: int) -> str:
    """`source` with a header, up to two locals renamed and `index % 3` helpers added."""
    renamed = source
    candidates = _renamable(source)
    if candidates:
        digest = int(hashlib.sha256(f"{index}".encode()).hexdigest(), 16)
        for step in range(min(2, len(candidates))):
            name = candidates[(digest >> (8 * step)) % len(candidates)]
            suffix = SUFFIXES[(index + step) % len(SUFFIXES)]
            renamed = _rename(renamed, name, f"{name}_{suffix}")
    helpers = "".join(
        f"\n\ndef _helper_{index}_{k}(values, scale={k + 1}):\n"
        f'    """Scales `values` (copy {index})."""\n'
        f"    return [value * scale + {index} for value in values]\n"
        for k in range(index % 3)
    )
    header = f"# copy {index}: adapted for experiment {index % EXPERIMENT_FOLDERS}\n"
    return header + renamed.rstrip("\n") + "\n" + helpers


def _renamable(source: str) -> list[str]:
    """Local variables safe to rename: assigned names, never imported, defined as a function
    or class, used as a keyword argument, declared global, or a builtin."""
    tree = ast.parse(source)
    stored, excluded = set(), set(dir(builtins))
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            stored.add(node.id)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            excluded.update((alias.asname or alias.name).split(".")[0] for alias in node.names)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            excluded.add(node.name)
        elif isinstance(node, ast.keyword) and node.arg:
            excluded.add(node.arg)
        elif isinstance(node, (ast.Global, ast.Nonlocal)):
            excluded.update(node.names)
        elif isinstance(node, ast.Attribute):
            excluded.add(node.attr)  # `self.model = model`: keep the pair recognisable
    return sorted(name for name in stored - excluded if not name.startswith("__"))


def _rename(source: str, old: str, new: str) -> str:
    """Every `old` variable (names and parameters) renamed, at the positions ast reports; the
    source unchanged if any position does not hold `old` (or the result does not parse)."""
    lines = source.encode().splitlines(keepends=True)
    places = []
    for node in ast.walk(ast.parse(source)):
        name = node.id if isinstance(node, ast.Name) else getattr(node, "arg", None)
        if name == old and isinstance(node, (ast.Name, ast.arg)):
            places.append((node.lineno, node.col_offset))
    word = old.encode()
    for line, column in sorted(places, reverse=True):
        text = lines[line - 1]
        if text[column : column + len(word)] != word:
            return source
        lines[line - 1] = text[:column] + new.encode() + text[column + len(word) :]
    result = b"".join(lines).decode()
    try:
        ast.parse(result)
    except SyntaxError:
        return source
    return result


def _copy_python_files(source: Path, target: Path) -> int:
    count = 0
    for directory, subdirectories, files in os.walk(source):
        subdirectories[:] = sorted(d for d in subdirectories if d != "__pycache__")
        for name in sorted(files):
            if name.endswith(".py"):
                relative = os.path.relpath(os.path.join(directory, name), source)
                destination = target / relative
                destination.parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(os.path.join(directory, name), destination)
                count += 1
    return count


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("directory", type=Path)
    args = parser.parse_args()
    counts = build(args.directory)
    print(f"{args.directory}: " + ", ".join(f"{n} {part}" for part, n in counts.items()))


if __name__ == "__main__":
    main()
