"""Objects held on other objects: an attribute chain names the object it reaches.

`self.cfg.optimiser`, `cfg.model`, `self.optimizers["g"]`: the object is named by its chain,
rooted where its holder (`self.cfg`, `cfg`) is made (facts.origin). A local alias of a holder
(`cfg = self.training_config`, then `cfg.model.train()`) reads the same object, so the chain is
followed through the alias. A chain whose holder the function or class receives from its
callers (`train(cfg, loader)`, `self.training_config = training_config`) is an object the
callers pass in, like a parameter.

The index binds and uses plain names and `self.x` only; these helpers read chains on top of it.
"""

from __future__ import annotations

import ast
import re

from migrator.analysis.catalogue import patterns
from migrator.analysis.syntax.index import Line, Use

_CUT = re.compile(r"[.\[]")


def key_text(node: ast.AST) -> str:
    key = patterns.string_value(node)
    return f'"{key}"' if '"' not in key and "\\" not in key else repr(key)


def chain_text(expr: ast.AST | None) -> str | None:
    """`self.cfg.optimiser`, `self.optimizers['g']`: an attribute / string-key chain as one
    name (the names chain_origin gives), None for anything else."""
    parts: list[str] = []
    while isinstance(expr, (ast.Attribute, ast.Subscript)):
        if isinstance(expr, ast.Attribute):
            parts.append(f".{expr.attr}")
        elif patterns.string_value(expr.slice) is not None:
            parts.append(f"[{key_text(expr.slice)}]")
        else:
            return None
        expr = expr.value
    if not isinstance(expr, ast.Name):
        return None
    return expr.id + "".join(reversed(parts))


def split_chain(name: str) -> tuple[str, str] | None:
    """(`self.cfg`, `.optimiser`) for `self.cfg.optimiser`, (`cfg`, `.model`) for `cfg.model`:
    the name the index knows (a plain name or `self.x`) and the rest; None when `name` is no
    longer than that."""
    cuts = [m.start() for m in _CUT.finditer(name)]
    first = 1 if name.startswith(patterns.SELF + ".") else 0
    if len(cuts) <= first:
        return None
    return name[: cuts[first]], name[cuts[first] :]


def holder_alias(scope, root: str) -> str | None:
    """`self.training_config` for `cfg` when `scope` binds `cfg = self.training_config` once
    (a plain name or a chain, no call) and does not receive it: the alias reads that object."""
    if root in scope.params or root.startswith(patterns.SELF + "."):
        return None
    bindings = scope.bindings.get(root, [])
    if len(bindings) != 1 or bindings[0].kind != "assign" or bindings[0].unpacked:
        return None
    target = chain_text(bindings[0].value)
    if target is None or target == root or target.split(".")[0].split("[")[0] == root:
        return None
    return target


def held_alias(scope, name: str, imports) -> str | None:
    """`self.cfg.model` for `model` when a function binds `model = self.cfg.model` once: a
    local name for an object held on another object is that object, prepared where its holder
    is bound when that is another function (facts.origin: a Trainer's `__init__`, so a method
    run every epoch does not prepare it again). Not `model.module` (DDP's plain model, on
    purpose) nor an imported module's."""
    if scope.kind != "function" or name in scope.params:
        return None
    bindings = scope.bindings.get(name, [])
    if len(bindings) != 1 or bindings[0].kind != "assign" or bindings[0].unpacked:
        return None
    chain = chain_text(bindings[0].value)
    parts = split_chain(chain) if chain is not None else None
    if parts is None or chain.endswith(".module") or imports.imported(re.split(r"[.\[]", chain)[0]):
        return None
    return chain


def chain_uses(scope, name: str, imports) -> list[Use]:
    """The uses of the object a chain names, read off the index's uses of its holder
    (`self.cfg` under `.model` in `self.cfg.model.train()`): Uses of `name` shaped like the
    index's uses of a plain name (attr / call / arg / iter / subscript / other)."""
    parts = split_chain(name)
    if parts is None:
        return []
    found = []
    for use in scope.uses.get(parts[0], []):
        if use.kind != "attr":
            continue
        lineage = _lineage(use)
        node = use.node
        while lineage and chain_text(node) != name and _holds(lineage[-1], node):
            node = lineage.pop()
        if chain_text(node) != name or isinstance(getattr(node, "ctx", None), ast.Store):
            continue
        found.append(_use_of(name, node, lineage[-2:], use, imports))
    return found


def read_chains(scope) -> list[str]:
    """`self.cfg.model`, `cfg.model`: the chains of one field `scope` reads off a name the
    index knows (candidates for objects held on other objects)."""
    found: dict[str, None] = {}
    for name, uses in scope.uses.items():
        for use in uses:
            if use.kind == "attr" and use.attr is not None:
                found.setdefault(f"{name}.{use.attr}")
    return list(found)


def _lineage(use) -> list[ast.AST]:
    """The nodes above `use.node` in its statement, outermost first."""
    statement = use.statement.node
    roots = statement.body if isinstance(statement, Line) else [statement]
    for root in roots:
        path = _path_to(root, use.node)
        if path is not None:
            return path
    return []


def _path_to(root: ast.AST, target: ast.AST) -> list[ast.AST] | None:
    stack = [(root, [])]
    while stack:
        node, above = stack.pop()
        if node is target:
            return above
        stack.extend((child, [*above, node]) for child in ast.iter_child_nodes(node))
    return None


def _holds(parent: ast.AST, node: ast.AST) -> bool:
    return isinstance(parent, (ast.Attribute, ast.Subscript)) and parent.value is node


def _use_of(name: str, node: ast.AST, above: list[ast.AST], holder, imports) -> Use:
    """A Use of `name` at `node`, under `above` (its grandparent and parent)."""
    kind, call, attr, callee = "other", None, None, None
    parent = above[-1] if above else None
    if isinstance(parent, ast.Attribute):
        kind, attr = "attr", parent.attr
        outer = above[0] if len(above) == 2 else None  # `self.cfg.model.train()`: the call
        call = outer if isinstance(outer, ast.Call) and outer.func is parent else None
    elif isinstance(parent, ast.Call) and parent.func is node:
        kind, call = "call", parent
    elif isinstance(parent, ast.Call):
        kind, call, callee = "arg", parent, imports.qualify(parent.func)
    elif isinstance(parent, ast.Subscript):
        kind = "subscript"
    elif isinstance(parent, (ast.For, ast.AsyncFor, ast.comprehension)) and parent.iter is node:
        kind = "iter"
    return Use(name=name, node=node, kind=kind, statement=holder.statement, loop=holder.loop,
               call=call, attr=attr, callee=callee)  # fmt: skip


def handed_in(scope, name: str) -> bool:
    """`self.loader` in an `__init__` that keeps `self.loader = loader`, `self.model, self.opt
    = model, opt`: a name `scope` binds only to its own parameters, objects its callers made."""
    bindings = scope.assigns(name)
    if not bindings:
        return False
    for binding in bindings:
        value = binding.element if binding.unpacked else binding.value
        if binding.kind != "assign" or not (
            isinstance(value, ast.Name) and value.id in scope.params
        ):
            return False
    return True


def received_chain(facts, scope, name: str) -> bool:
    """`cfg.model` in `train(cfg, loader)`, `self.training_config.model` in an `__init__` that
    keeps `self.training_config = training_config`: an object `scope` does not make but
    receives from its callers on a holder."""
    parts = split_chain(name)
    if parts is None or facts.chain_bindings(scope, name):
        return False
    holder = parts[0]
    if holder in scope.params:
        return True
    bindings = scope.assigns(holder)
    return bool(bindings) and all(
        isinstance(b.value, ast.Name) and b.value.id in scope.params and not b.unpacked
        for b in bindings
    )


def module_alias(value: ast.expr | None) -> tuple[str, bool] | None:
    """(`x`, whether it reads the module inside `x`) for a value naming one object `x` as
    wrapped or not: `x`, `x.module`, `x.module if ddp else x` (either way round). Native DDP
    programs keep the plain module under a second name (`raw_model = model.module if ddp
    else model`); MIG010 unwraps `x`, so every spelling is `x` again. None for anything else."""
    parts = [value.body, value.orelse] if isinstance(value, ast.IfExp) else [value]
    names, inside = set(), False
    for part in parts:
        if isinstance(part, ast.Attribute) and part.attr == "module":
            part, inside = part.value, True
        if not isinstance(part, ast.Name):
            return None
        names.add(part.id)
    return (names.pop(), inside) if len(names) == 1 else None
