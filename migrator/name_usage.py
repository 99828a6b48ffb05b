"""Which names a module reads, and where: enough to tell whether an import is still used
(a name read in a scope that sees the import, an `__all__` entry or a string annotation)."""

from __future__ import annotations

import ast

from migrator.source import quiet_parse


class NameUsage:
    """Which names are read where: enough to tell whether an import is still used."""

    def __init__(self, tree: ast.Module) -> None:
        self.exported: set[str] = set()
        self.annotated: set[str] = set()
        self.loads: dict[int, set[str]] = {}  # id(scope node) -> names read directly there
        self.binds: dict[int, set[str]] = {}
        self.globals: dict[int, set[str]] = {}
        self.children: dict[int, list] = {}
        self.kinds: dict[int, str] = {}
        self._walk(tree, tree, "module")
        self._exports(tree)

    def used(self, scope_node, names: list[str]) -> bool:
        if any(name in self.exported or name in self.annotated for name in names):
            return True
        return any(self._reads(scope_node, name.split(".")[0]) for name in names)

    def _reads(self, scope_node, name: str, own: bool = True) -> bool:
        """Is `name` read in `scope_node` (unless not `own`) or in a scope inside it that sees
        its binding? A function binding the name hides it from everything inside; a class
        body hides it from itself only (its methods look past it)."""
        key = id(scope_node)
        if own and name in self.loads.get(key, set()):
            return True
        for child in self.children.get(key, []):
            child_key = id(child)
            shadowed = name in self.binds.get(child_key, set()) and name not in self.globals.get(
                child_key, set()
            )
            if shadowed and self.kinds[child_key] == "function":
                continue
            if self._reads(child, name, own=not shadowed):
                return True
        return False

    def _walk(self, node, scope, kind: str) -> None:
        self.kinds[id(scope)] = kind
        self.loads.setdefault(id(scope), set())
        self.binds.setdefault(id(scope), set())
        for child in ast.iter_child_nodes(node):
            self._visit(child, scope)

    def _visit(self, node, scope) -> None:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
            if not isinstance(node, ast.Lambda):
                self.binds[id(scope)].add(node.name)
                for decorator in node.decorator_list:
                    self._visit(decorator, scope)
            kind = "class" if isinstance(node, ast.ClassDef) else "function"
            if isinstance(node, ast.ClassDef):
                for base in [*node.bases, *node.keywords]:
                    self._visit(base, scope)
            else:
                self._defaults(node.args, scope)
                if not isinstance(node, ast.Lambda) and node.returns is not None:
                    self._annotation(node.returns, scope)
            self.children.setdefault(id(scope), []).append(node)
            self.kinds[id(node)] = kind
            self.loads.setdefault(id(node), set())
            self.binds.setdefault(id(node), set())
            if not isinstance(node, ast.ClassDef):
                arguments = node.args
                for arg in (*arguments.posonlyargs, *arguments.args, *arguments.kwonlyargs,
                            arguments.vararg, arguments.kwarg):  # fmt: skip
                    if arg is not None:
                        self.binds[id(node)].add(arg.arg)
            body = node.body if isinstance(node.body, list) else [node.body]
            for child in body:
                self._visit(child, node)
            return
        if isinstance(node, ast.Name):
            if isinstance(node.ctx, ast.Store):
                self.binds[id(scope)].add(node.id)
            else:
                self.loads[id(scope)].add(node.id)
            return
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            for alias in node.names:
                self.binds[id(scope)].add((alias.asname or alias.name).split(".")[0])
            return
        if isinstance(node, (ast.Global, ast.Nonlocal)):
            self.globals.setdefault(id(scope), set()).update(node.names)
            return
        if isinstance(node, ast.ExceptHandler) and node.name:
            self.binds[id(scope)].add(node.name)
        if isinstance(node, ast.arg) and node.annotation is not None:
            self._annotation(node.annotation, scope)
            return
        if isinstance(node, ast.AnnAssign):
            self._annotation(node.annotation, scope)
            self._visit(node.target, scope)
            if node.value is not None:
                self._visit(node.value, scope)
            return
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, (ast.Name, ast.Attribute))
            and (
                (node.func.id if isinstance(node.func, ast.Name) else node.func.attr)
                in ("cast", "TypeVar")
            )
        ):
            for arg in node.args:
                if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
                    self._string_annotation(arg.value)
        for child in ast.iter_child_nodes(node):
            self._visit(child, scope)

    def _defaults(self, arguments: ast.arguments, scope) -> None:
        for default in [*arguments.defaults, *arguments.kw_defaults]:
            if default is not None:
                self._visit(default, scope)
        for arg in (*arguments.posonlyargs, *arguments.args, *arguments.kwonlyargs,
                    arguments.vararg, arguments.kwarg):  # fmt: skip
            if arg is not None and arg.annotation is not None:
                self._annotation(arg.annotation, scope)

    def _annotation(self, node, scope) -> None:
        for current in ast.walk(node):
            if isinstance(current, ast.Constant) and isinstance(current.value, str):
                self._string_annotation(current.value)
        self._visit(node, scope)

    def _string_annotation(self, value: str) -> None:
        try:
            parsed = quiet_parse(value.strip(), mode="eval")
        except SyntaxError:
            return
        for current in ast.walk(parsed):
            if isinstance(current, ast.Name):
                self.annotated.add(current.id)
            elif isinstance(current, ast.Attribute):
                dotted = _dotted(current)
                if dotted:
                    self.annotated.add(dotted)

    def _exports(self, tree: ast.Module) -> None:
        for node in tree.body:
            targets = []
            if isinstance(node, ast.Assign):
                targets, value = node.targets, node.value
            elif isinstance(node, (ast.AugAssign, ast.AnnAssign)):
                targets, value = [node.target], node.value
            if any(isinstance(t, ast.Name) and t.id == "__all__" for t in targets) and isinstance(
                value, (ast.List, ast.Tuple, ast.Set)
            ):
                for element in value.elts:
                    if isinstance(element, ast.Constant) and isinstance(element.value, str):
                        self.exported.add(element.value)


def _dotted(node) -> str | None:
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name):
        return None
    parts.append(node.id)
    return ".".join(reversed(parts))
