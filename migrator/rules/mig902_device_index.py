"""MIG902 explicit device index: `.cuda(1)`, `.to("cuda:1")`, `torch.device("cuda", 1)`, a
`--device` flag whose default is `"cuda:1"` pin a GPU, but under Accelerate each process owns
one device. Reported, never rewritten; except the
first GPU chosen as the script's device (`device = torch.device("cuda:0")`, what a one-GPU
script means by "the GPU"), which MIG002 already made `accelerator.device`.

Only in files with distributed intent (a training loop, or DataParallel): an inference script
pinning a GPU is not ours to judge.
"""

from __future__ import annotations

import ast

from migrator.analysis.catalogue import patterns
from migrator.analysis.syntax.views import integer_text
from migrator.findings import Finding
from migrator.rules.base import Rule, RuleContext
from migrator.rules.mig901_data_parallel import data_parallel_calls

VISIBLE = "CUDA_VISIBLE_DEVICES"
RANK_LIKE = {"rank", "gpu", "local_rank", "device_id", "gpu_id", "local_process_index"}


class DeviceIndex(Rule):
    code = "MIG902"
    name = "device-index"
    summary = "report .cuda(i) / 'cuda:i' device pinning (finding: use accelerator.device)"
    triggers = (".DataParallel", " DataParallel", "(DataParallel", "=DataParallel",
                ",DataParallel", "\nDataParallel", "backward")  # fmt: skip
    detector = True

    def apply(self, context: RuleContext) -> None:
        if not context.facts.training_loops and not data_parallel_calls(context):
            return
        imports = context.facts.index.imports
        for site in context.facts.index.calls():
            index = explicit_index(context.source, site.node, imports)
            if index in ("0", "'cuda:0'", '"cuda:0"') and any(
                site.node in (b.value, b.element) for b in context.facts.device_bindings
            ):  # `device = torch.device("cuda:0")`, the one GPU: MIG002 makes it accelerator.device
                continue
            if index is not None:
                context.findings.append(Finding(
                    code=self.code,
                    message=f"explicit device index {index}: each process owns one device "
                    "under Accelerate; use accelerator.device",
                    node=site.node,
                ))  # fmt: skip
        tree = context.facts.index.tree
        for node in visible_devices_writes(tree, imports):
            gpus = _listed_before_torch(tree, node)
            if gpus:
                context.findings.append(Finding(code=self.code, node=node, level="note", message=(
                    f"CUDA_VISIBLE_DEVICES is set here, before CUDA starts, to {gpus} GPUs: "
                    "every process sees those, and each takes its own among them "
                    f"(`accelerator.device`); launch at most {gpus} processes per machine")))  # fmt: skip
                continue
            if _pins_after_cuda(context, node):
                context.findings.append(Finding(code=self.code, node=node, level="note", message=(
                    "CUDA_VISIBLE_DEVICES is set here from this process's rank after CUDA "
                    "started (the original's own one-GPU-per-process pinning): it changes "
                    "nothing for this process, whose GPU is `accelerator.device`; it can go")))  # fmt: skip
                continue
            context.findings.append(Finding(
                code=self.code, node=node,
                message="CUDA_VISIBLE_DEVICES set here chooses the GPUs the program sees: under a "
                "launcher every process would see only those (or the line comes after the "
                "Accelerator took its GPU and does nothing), while each process must own a GPU "
                "of its own; remove it and choose the GPUs on the launch command "
                "(`CUDA_VISIBLE_DEVICES=0,1 migrate launch --nproc 2 ...`)",
            ))  # fmt: skip


CUDA_STARTS = {"torch.cuda.set_device", "torch.cuda.init"}


def _pins_after_cuda(context: RuleContext, node: ast.AST) -> bool:
    """`os.environ["CUDA_VISIBLE_DEVICES"] = str(local_rank)` after the same function set
    up CUDA (`torch.cuda.set_device(...)`, `.cuda(...)`, a DDP wrap): a rank's pinning that
    CUDA, started, no longer reads."""
    value = node.value if isinstance(node, ast.Assign) else None
    if value is None or "rank" not in ast.unparse(value).lower():
        return False
    statement = context.facts.index.statement_of_small(node)
    if statement is None:
        return False
    imports = context.facts.index.imports
    return any(
        site.node.lineno < node.lineno
        and (imports.qualify(site.node.func) in CUDA_STARTS or site.method == "cuda"
             or (imports.qualify(site.node.func) or "").endswith("DistributedDataParallel"))
        for site in statement.block.scope.calls
    )  # fmt: skip


def _listed_before_torch(tree: ast.Module, node: ast.AST) -> int:
    """How many GPUs `os.environ["CUDA_VISIBLE_DEVICES"] = "0,1,8,9"` lists, where it is a
    module-level statement before the first import of torch (so before CUDA starts and before
    any Accelerator), or among the imports after it listing the first GPUs in order ("0,1":
    the same GPUs whether it runs before the Accelerator or after): 0 for anything else, and
    for a list of one GPU (N processes on it)."""
    value = getattr(node, "value", None)
    text = patterns.string_value(value) if isinstance(value, ast.expr) else None
    if text is None or node not in tree.body:
        return 0
    torch_imports = [
        statement.lineno for statement in tree.body
        if isinstance(statement, (ast.Import, ast.ImportFrom))
        and any(name.startswith("torch") for name in _imported_modules(statement))
    ]  # fmt: skip
    gpus = [part.strip() for part in text.split(",") if part.strip()]
    if len(gpus) < 2:
        return 0
    if torch_imports and node.lineno < min(torch_imports):
        return len(gpus)
    # after `import torch` (CUDA starts later), among the imports, listing the first GPUs in
    # order ("0,1", "0,1,2,3"): every process sees them wherever the Accelerator is made
    among_imports = all(
        isinstance(statement, (ast.Import, ast.ImportFrom))
        or (isinstance(statement, ast.Expr) and isinstance(statement.value, ast.Constant))
        for statement in tree.body[: tree.body.index(node)]
    )
    first = gpus == [str(number) for number in range(len(gpus))]
    return len(gpus) if among_imports and first else 0


def _imported_modules(statement: ast.Import | ast.ImportFrom) -> list[str]:
    if isinstance(statement, ast.ImportFrom):
        return [statement.module or ""]
    return [alias.name for alias in statement.names]


def visible_devices_writes(tree: ast.Module, imports) -> list[ast.AST]:
    """`os.environ["CUDA_VISIBLE_DEVICES"] = ...`, `os.environ.setdefault(...)`,
    `os.environ.update(CUDA_VISIBLE_DEVICES=...)`, `os.putenv(...)` on that variable."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, (ast.Assign, ast.AugAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            if any(_environ_item(t, imports) for t in targets):
                found.append(node)
        elif isinstance(node, ast.Call) and _sets_visible(node, imports):
            found.append(node)
    return found


def _sets_visible(call: ast.Call, imports) -> bool:
    if not isinstance(call.func, ast.Attribute):
        return False
    owner = imports.qualify(call.func.value) or ""
    method = call.func.attr
    if (owner, method) in (("os.environ", "setdefault"), ("os", "putenv")):
        return [patterns.string_value(a) for a in call.args[:1]] == [VISIBLE]
    if (owner, method) == ("os.environ", "update"):
        keys = [
            patterns.string_value(k) for a in call.args if isinstance(a, ast.Dict) for k in a.keys
        ]
        return VISIBLE in keys or any(k.arg == VISIBLE for k in call.keywords)
    return False


def _environ_item(target: ast.expr, imports) -> bool:
    return (
        isinstance(target, ast.Subscript)
        and (imports.qualify(target.value) or "") == "os.environ"
        and patterns.string_value(target.slice) == VISIBLE
    )


def explicit_index(source, call: ast.Call, imports) -> str | None:
    func = call.func
    args = patterns.positional(call)
    if isinstance(func, ast.Attribute) and func.attr == "add_argument":
        return _flag_default(source, call)
    if not args:
        return None
    if isinstance(func, ast.Attribute) and func.attr == "cuda":
        return integer_text(source, args[0].value)
    if isinstance(func, ast.Attribute) and func.attr == "to":
        return _indexed_string(source, args[0].value)
    if (imports.qualify(func) or "") == "torch.device":
        if len(args) >= 2:
            return integer_text(source, args[1].value)
        return _indexed_string(source, args[0].value)
    return None


def _flag_default(source, call: ast.Call) -> str | None:
    """`parser.add_argument("--device", default="cuda:1")`: the device the script runs on
    unless told otherwise pins a GPU (`cuda:0`, "the GPU" of a one-GPU script, does not)."""
    names = [patterns.string_value(a) or "" for a in call.args]
    default = next((k.value for k in call.keywords if k.arg == "default"), None)
    if not any(patterns.looks_like_device_name(n.lstrip("-").replace("-", "_")) for n in names):
        return None
    index = _indexed_string(source, default) if default is not None else None
    return None if index in ("'cuda:0'", '"cuda:0"') else index


def _indexed_string(source, expr: ast.expr) -> str | None:
    value = patterns.string_value(expr)
    if value is not None:
        return repr(value) if value.startswith("cuda:") else None
    if not isinstance(expr, ast.JoinedStr):
        return None
    text = "".join(p.value for p in expr.values if isinstance(p, ast.Constant))
    names = {
        source.text_of(p.value).split(".")[-1]
        for p in expr.values
        if isinstance(p, ast.FormattedValue)
    }
    if text.startswith("cuda:") and not names & RANK_LIKE:
        return source.text_of(expr)
    return None
