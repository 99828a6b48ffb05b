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

from migrator.analysis import patterns

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


def chain_uses(scope, name: str) -> list:
    """The index's uses of `name`'s holder that reach it (`self.cfg` used with `.optimiser`
    for `self.cfg.optimiser`): where a chain of attributes is read in `scope`."""
    parts = split_chain(name)
    if parts is None:
        return []
    head, rest = parts
    match = re.match(r"\.(\w+)", rest)
    if match is None:
        return []
    return [u for u in scope.uses.get(head, []) if u.kind == "attr" and u.attr == match[1]]


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
