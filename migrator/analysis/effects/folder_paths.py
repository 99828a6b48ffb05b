"""The folders a written file lies in, and the folder a read lists, as the program spells
them: a read of a folder (`ImageFolder(root)`, `os.listdir(d)`, `glob.glob(f"{d}/*.png")`,
`Path(d).glob("*")`, `load_from_disk(d)`, `X.from_pretrained(d)`) reads every file the
program wrote under it (shared_files.py waits for the main process's writes before it).

A folder is known by its text where the path is built from it (`os.path.join(d, name)`,
`d + "/" + name`, `d / name`, `f"{d}/{name}"`: the folder `d`), or by the static start of
the path: `"/data/edit/" + microbe + "/" + name` lies in `/data/edit` and its parents, as
does a path built from a name bound once to such a value. Keys: ("dir", "/data/edit")
(no trailing slash, no leading "./") and ("text", "d").
"""

from __future__ import annotations

import ast
from collections.abc import Callable

from migrator.analysis.catalogue import patterns

FOLDER_READS = {"torchvision.datasets.ImageFolder", "torchvision.datasets.DatasetFolder",
                "torchvision.datasets.folder.ImageFolder", "os.listdir", "os.scandir", "os.walk",
                "glob.glob", "glob.iglob", "datasets.load_from_disk"}  # fmt: skip
FOLDER_METHODS = {"glob", "rglob", "iterdir"}  # `Path(d).glob("*.png")`
JOINS = {"os.path.join", "posixpath.join"}
PATHS = {"pathlib.Path", "pathlib.PurePath", "str", "os.fspath"}
WILDCARDS = "*?["

Resolve = Callable[[ast.Name], "ast.expr | None"]  # the value a name is bound to once, or None
Qualify = Callable[[ast.expr], "str | None"]


def folder_read(call: ast.Call, qualify: Qualify) -> ast.expr | None:
    """The folder (or glob pattern) a call lists, or None: `ImageFolder(root=d)`,
    `os.listdir(d)`, `glob.glob(pattern)`, `Path(d).glob(...)`, `X.from_pretrained(d)`."""
    func = call.func
    method = func.attr if isinstance(func, ast.Attribute) else None
    if method in FOLDER_METHODS and qualify(func) not in FOLDER_READS:
        receiver = func.value
        if isinstance(receiver, ast.Call) and qualify(receiver.func) in PATHS and receiver.args:
            return receiver.args[0]
        return receiver if isinstance(receiver, (ast.Name, ast.Attribute)) else None
    if qualify(func) in FOLDER_READS or method == "from_pretrained":
        args = patterns.positional(call)
        if args:
            return args[0].value
        for name in ("root", "path", "pathname", "top", "dataset_path", "top_dir"):
            found = patterns.keyword(call, name)
            if found is not None:
                return found.value
    return None


def read_keys(path: ast.expr, text: Callable[[ast.expr], str], resolve: Resolve,
              qualify: Qualify) -> set[tuple]:  # fmt: skip
    """The keys a listed folder (or a glob pattern's folder) is known by."""
    start = static_start(path, resolve, qualify)
    keys: set[tuple] = set()
    if start is not None:
        value, complete = start
        cut = min((value.find(c) for c in WILDCARDS if c in value), default=-1)
        if cut >= 0:
            value, complete = value[:cut], False
        if complete:
            keys.add(("dir", _normal(value)))
        elif "/" in value:
            keys.add(("dir", _normal(value[: value.rfind("/")])))
    root = _root(path, qualify)
    if root is None and not _is_pattern(start):
        root = path
    if root is not None:
        keys.add(("text", text(_unwrapped(root, qualify)).strip()))
    keys.discard(("dir", ""))
    return keys


def _is_pattern(start) -> bool:
    return start is not None and any(c in start[0] for c in WILDCARDS)


def folders_above(path: ast.expr, text: Callable[[ast.expr], str], resolve: Resolve,
                  qualify: Qualify, *, is_folder: bool = False) -> set[tuple]:  # fmt: skip
    """The keys of the folders a file written at `path` lies in (`is_folder`: `path` names a
    folder the file lies in, a helper's parameter its body builds the path from)."""
    keys: set[tuple] = set()
    start = static_start(path, resolve, qualify)
    if start is not None:
        value, complete = start
        if is_folder and complete:
            value += "/"
        keys |= {("dir", d) for d in _parents(value)}
    if is_folder:
        keys.add(("text", text(path).strip()))
    root = _root(path, qualify)
    while root is not None:
        keys.add(("text", text(root).strip()))
        inner = _unwrapped(root, qualify)
        if inner is not root:
            keys.add(("text", text(inner).strip()))
        root = _root(root, qualify)
    return keys


def _unwrapped(path: ast.expr, qualify: Qualify) -> ast.expr:
    """`d` of `Path(d)`, `str(d)`."""
    while isinstance(path, ast.Call) and qualify(path.func) in PATHS and len(path.args) == 1:
        path = path.args[0]
    return path


def under_parameter(path: ast.expr, params: set[str], qualify: Qualify) -> str | None:
    """The parameter a written path is built under (`save_path + "/" + name` in
    `def cut(save_path, name)`), or None."""
    root = _root(path, qualify)
    while root is not None and not isinstance(root, ast.Name):
        root = _root(root, qualify)
    return root.id if isinstance(root, ast.Name) and root.id in params else None


def _parents(value: str) -> list[str]:
    """The folders above a path's static start: "/a/b/c.png" and "/a/b/" give "/a/b", "/a";
    "out/x" gives "out"."""
    found = []
    value = value[: value.rfind("/")] if "/" in value else ""
    while value:
        normal = _normal(value)
        if normal:
            found.append(normal)
        value = value[: value.rfind("/")] if "/" in value else ""
    return found


def _normal(value: str) -> str:
    while value.startswith("./"):
        value = value[2:]
    while "//" in value:
        value = value.replace("//", "/")
    return value.rstrip("/") if value not in ("/", "") else ""


def _root(path: ast.expr, qualify: Qualify) -> ast.expr | None:
    """The folder a path is built under: `d` of `os.path.join(d, f)`, `d + "/" + f`,
    `d / f`, `f"{d}/{f}"`, `Path(d) / f`."""
    if isinstance(path, ast.Call):
        name = qualify(path.func)
        if name in JOINS and len(path.args) > 1:
            return path.args[0]
        if name in PATHS and len(path.args) == 1:
            return _root(path.args[0], qualify)
        return None
    if isinstance(path, ast.BinOp) and isinstance(path.op, ast.Div):
        return path.left
    if isinstance(path, ast.BinOp) and isinstance(path.op, ast.Add):
        operands = _added(path)
        following = patterns.string_value(operands[1])
        return operands[0] if following is not None and following.startswith("/") else None
    if isinstance(path, ast.JoinedStr) and len(path.values) > 1:
        first, following = path.values[0], patterns.string_value(path.values[1])
        if isinstance(first, ast.FormattedValue) and (following or "").startswith("/"):
            return first.value
    return None


def _added(node: ast.expr) -> list[ast.expr]:
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        return [*_added(node.left), node.right]
    return [node]


def static_start(path: ast.expr | None, resolve: Resolve, qualify: Qualify,
                 depth: int = 0) -> tuple[str, bool] | None:  # fmt: skip
    """The text a path starts with whatever runs, and whether that is all of it."""
    if path is None or depth > 6:
        return None
    value = patterns.string_value(path)
    if value is not None:
        return value, True
    if isinstance(path, ast.Name):
        return static_start(resolve(path), resolve, qualify, depth + 1)
    if isinstance(path, ast.BinOp) and isinstance(path.op, (ast.Add, ast.Div)):
        parts = _added(path) if isinstance(path.op, ast.Add) else [path.left, path.right]
        glue = "" if isinstance(path.op, ast.Add) else "/"
        return _concatenate(parts, glue, resolve, qualify, depth)
    if isinstance(path, ast.Call):
        name = qualify(path.func)
        if name in JOINS:
            return _concatenate(path.args, "/", resolve, qualify, depth)
        if name in PATHS and len(path.args) == 1:
            return static_start(path.args[0], resolve, qualify, depth + 1)
        return None
    if isinstance(path, ast.JoinedStr):
        parts = [v.value if isinstance(v, ast.FormattedValue) else v for v in path.values]
        return _concatenate(parts, "", resolve, qualify, depth)
    return None


def _concatenate(parts, glue: str, resolve: Resolve, qualify: Qualify, depth: int):
    text = ""
    for position, part in enumerate(parts):
        found = static_start(part, resolve, qualify, depth + 1)
        if found is None:
            return (text + glue, False) if position else None
        text = text + glue + found[0] if position else found[0]
        if not found[1]:
            return text, False
    return text, True
