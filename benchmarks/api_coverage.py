"""API coverage: the share of `accelerator.<name>` uses in real Accelerate code that `runtime` has.

Scans the Python files of one or more trees that import `accelerate`, counts every attribute
read on an accelerator object (`accelerator.x`, `self.accelerator.x`, or a name bound to
`Accelerator(...)` in that file), and checks each name against an instance of
`runtime.Accelerator` and, as the reference in the same invocation, of HF Accelerate's
`Accelerator(cpu=True)` when it is installed. A name counts as supported when the instance has it
as a class or instance attribute (names that `runtime` answers with NotImplementedError, such as
the DeepSpeed ones, do not count).

    python benchmarks/api_coverage.py TREE [TREE...] [--top 40] [--json coverage.json]
    python benchmarks/api_coverage.py --manifest benchmarks/accelerate_corpus.txt CORPUS

With `--manifest`, the tree is CORPUS/owner+name/ for each repository of the manifest, limited
to the folders the manifest names (library repositories: their examples, not their internals).

Prints the shares; no threshold is asserted here.
"""

from __future__ import annotations

import argparse
import ast
import importlib.util
import inspect
import json
import sys
from collections import Counter
from pathlib import Path

RECEIVER_NAMES = {"accelerator"}
# `accelerator.state.x` and `accelerator.gradient_state.x` count as uses of "state.x" too
NESTED = ("state", "gradient_state")


def imports_accelerate(tree: ast.Module) -> bool:
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            modules = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0:
            modules = [node.module or ""]
        else:
            continue
        if any(module.split(".")[0] == "accelerate" for module in modules):
            return True
    return False


def accelerator_variables(tree: ast.Module) -> set[str]:
    """`accelerator` plus every plain name assigned an `Accelerator(...)` call in the file."""
    names = set(RECEIVER_NAMES)
    for node in ast.walk(tree):
        if isinstance(node, (ast.Assign, ast.AnnAssign)) and isinstance(node.value, ast.Call):
            func = node.value.func
            called = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", None)
            if called != "Accelerator":
                continue
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names.update(target.id for target in targets if isinstance(target, ast.Name))
    return names


def is_receiver(node: ast.expr, variables: set[str]) -> bool:
    if isinstance(node, ast.Name):
        return node.id in variables
    # self.accelerator, trainer.accelerator, ... (but not torch.accelerator: a torch module)
    if isinstance(node, ast.Attribute) and node.attr in RECEIVER_NAMES:
        return not (isinstance(node.value, ast.Name) and node.value.id == "torch")
    return False


def attribute_uses(source: str) -> Counter | None:
    """Counts of `accelerator.<name>` in one file; None if it does not import accelerate."""
    tree = ast.parse(source)
    if not imports_accelerate(tree):
        return None
    variables = accelerator_variables(tree)
    uses: Counter = Counter()
    for node in ast.walk(tree):
        if not isinstance(node, ast.Attribute):
            continue
        if is_receiver(node.value, variables):
            uses[node.attr] += 1
        inner = node.value
        nested = isinstance(inner, ast.Attribute) and inner.attr in NESTED
        if nested and is_receiver(inner.value, variables):
            uses[f"{inner.attr}.{node.attr}"] += 1
    return uses


def scan(trees: list[Path]) -> tuple[Counter, int, list[str]]:
    """(uses by name, files importing accelerate, files that could not be parsed)"""
    total: Counter = Counter()
    files = 0
    unparsable = []
    for root in trees:
        paths = [root] if root.is_file() else sorted(root.rglob("*.py"))
        for path in paths:
            source = path.read_text(encoding="utf-8", errors="replace")
            if "accelerate" not in source:  # cheap prefilter: no import of it
                continue
            try:
                uses = attribute_uses(source)
            except (SyntaxError, ValueError):
                unparsable.append(str(path))
                continue
            if uses is not None:
                files += 1
                total.update(uses)
    return total, files, unparsable


def manifest_trees(manifest: Path, corpus: Path) -> list[Path]:
    """The folders a manifest names, under CORPUS/owner+name/ (see accelerate_corpus.txt)."""
    trees = []
    for line in manifest.read_text().splitlines():
        fields = line.split("#", 1)[0].split()
        if not fields:
            continue
        repository = corpus / fields[0].replace("/", "+")
        if not repository.is_dir():
            sys.exit(f"api_coverage: error: {repository}: not fetched (see {manifest})")
        trees += [repository / folder for folder in fields[2:]] or [repository]
    return trees


def has_attribute(instance: object, name: str) -> bool:
    """A class or instance attribute, found without running properties or `__getattr__`.

    "state.x" is looked up on `instance.state`.
    """
    owner, _, name = name.rpartition(".")
    if owner:
        try:
            instance = getattr(instance, owner)
        except Exception:  # noqa: BLE001 - no such object: not supported
            return False
    try:
        inspect.getattr_static(instance, name)
    except AttributeError:
        return False
    return True


def share(uses: Counter, instance: object) -> tuple[float, Counter]:
    missing = Counter({name: n for name, n in uses.items() if not has_attribute(instance, name)})
    covered = sum(uses.values()) - sum(missing.values())
    return covered / max(1, sum(uses.values())), missing


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("trees", nargs="+", type=Path, help="trees to scan (or the corpus root)")
    parser.add_argument("--manifest", type=Path, help="scan the manifest's folders under TREE")
    parser.add_argument("--top", type=int, default=30, help="missing names to list")
    parser.add_argument("--json", type=Path, help="also write the figures here")
    args = parser.parse_args()
    if args.manifest:
        args.trees = [t for root in args.trees for t in manifest_trees(args.manifest, root)]
    for tree in args.trees:
        if not tree.exists():
            sys.exit(f"api_coverage: error: {tree}: no such file or directory")

    uses, files, unparsable = scan(args.trees)
    print(
        f"{files} files import accelerate; {sum(uses.values())} `accelerator.<name>` uses "
        f"of {len(uses)} distinct names (`accelerator.state.x` also counts as 'state.x'; "
        f"{len(unparsable)} files not parsable, skipped)"
    )

    from runtime import Accelerator

    instances = {"runtime": Accelerator()}
    if importlib.util.find_spec("accelerate") is not None:
        from accelerate import Accelerator as HFAccelerator

        instances["accelerate"] = HFAccelerator(cpu=True)
    report = {"files": files, "uses": sum(uses.values()), "names": len(uses), "runtimes": {}}
    for label, instance in instances.items():
        fraction, missing = share(uses, instance)
        names_known = len(uses) - len(missing)
        print(
            f"  {label:<11} {fraction:7.1%} of uses, {names_known}/{len(uses)} names "
            f"({sum(missing.values())} uses of {len(missing)} names missing)"
        )
        report["runtimes"][label] = {"share": fraction, "missing": dict(missing.most_common())}
    if "accelerate" in instances:
        ratio = report["runtimes"]["runtime"]["share"] / report["runtimes"]["accelerate"]["share"]
        print(f"  runtime / accelerate: x{ratio:.3f}")
    missing = Counter(report["runtimes"]["runtime"]["missing"])
    if missing:
        listed = ", ".join(f"{name} {n}" for name, n in missing.most_common(args.top))
        print(f"missing on runtime, by uses: {listed}")
    if args.json:
        args.json.write_text(json.dumps(report, indent=2) + "\n")


if __name__ == "__main__":
    main()
