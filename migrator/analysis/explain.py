"""What MIG900 says: what the analysis looked for and what it found instead, with the line
numbers of both (issue 16 item 4). Pure text built from the index; the analysis decides,
this module only words the decision.
"""

from __future__ import annotations

import ast

from migrator.analysis import patterns
from migrator.analysis.facts import TrainingFacts, argument_for, call_sites_of, is_method
from migrator.analysis.index import CallSite, Loop, Scope


def where(scope: Scope) -> str:
    """`in `train()` (line 12)`, `at module level`."""
    if scope.kind == "module":
        return "at module level"
    if is_method(scope):
        return f"in `{scope.parent.name}.{scope.name}()` (line {scope.node.lineno})"
    return f"in `{scope.name}()` (line {scope.node.lineno})"


def loop_words(loop: Loop, loader: str | None = None) -> str:
    """`the training loop at line 12 (over `train_loader`)`."""
    over = f" (over `{loader}`)" if loader else ""
    return f"the training loop at line {loop.node.lineno}{over}"


def untraceable(facts: TrainingFacts, scope: Scope, name: str) -> str:
    """Why `origin(scope, name)` found no single place where `name` is made."""
    if name.startswith(patterns.SELF + "."):
        methods = [m for m in scope.parent.children if m.kind == "function" and m.assigns(name)] \
            if is_method(scope) else []  # fmt: skip
        if not methods:
            return f"`{name}` is never assigned in this class" + (
                _in_bases(facts, scope.parent, name) if is_method(scope) else ""
            )
        lines = ", ".join(str(m.assigns(name)[0].statement.node.lineno) for m in methods)
        return f"`{name}` is assigned in several methods (lines {lines}), none of them __init__"
    if scope.kind == "function" and name in scope.params:
        sites = call_sites_of(facts.index, scope)
        if not sites:
            return (f"`{name}` is a parameter {where(scope)} and no call in this file "
                    "passes it")  # fmt: skip
        passed = []
        for site in sites:
            argument = argument_for(site.node, scope, name)
            text = ast.unparse(argument) if argument is not None else "nothing"
            passed.append(f"`{text}` at line {site.node.lineno}")
        return f"`{name}` is a parameter {where(scope)}; the calls pass " + ", ".join(passed)
    found = facts.origin(scope, name)
    if found is not None and found.scope is not scope:  # made, but in another function
        made = found.scope.assigns(found.name)
        line = f" at line {made[0].statement.node.lineno}" if made else ""
        return (f"`{name}` is made{line} {where(found.scope)}, not {where(scope)}, where the "
                "optimizer that trains it is made")  # fmt: skip
    return f"`{name}` is not made {where(scope)} or in a scope around it"


def _in_bases(facts: TrainingFacts, cls: Scope, name: str) -> str:
    """Where the base classes of `cls` assign `self.x`, or that they are not in this file."""
    bases = [ast.unparse(base) for base in cls.node.bases if ast.unparse(base) != "object"]
    if not bases:
        return ""
    classes = {c.name: c for c in facts.index.scopes if c.kind == "class"}
    found, missing = [], []
    for base in bases:
        known = classes.get(base)
        if known is None:
            missing.append(f"`{base}`")
            continue
        for method in (m for m in known.children if m.kind == "function" and m.assigns(name)):
            line = method.assigns(name)[0].statement.node.lineno
            found.append(f"in its base class `{base}.{method.name}()` (line {line})")
    if found:
        shared = sorted(c.name for c in classes.values() if c is not cls and any(
            ast.unparse(b) in bases for b in c.node.bases))  # fmt: skip
        verb = "derives" if len(shared) == 1 else "derive"
        names = ", ".join(f"`{c}`" for c in shared)
        also = f", which {names} also {verb} from" if shared else ""
        return f"; it is assigned {', '.join(found)}{also}"
    return f"; its base class {', '.join(missing)} is not in this file"


def no_optimizer(facts: TrainingFacts, owner: Scope, steps: list[tuple[CallSite, object]],
                 unnamed: list[CallSite], kind_of) -> str:  # fmt: skip
    """MIG900 when the loop steps something but no optimizer made in `owner`."""
    loop = facts.training_loops[0]
    found = []
    for call, origin in steps:
        receiver = patterns.name_of(call.receiver)
        line = call.node.lineno
        if origin.scope is not owner:
            made = origin.scope.assigns(origin.name)
            at = f" at line {made[0].statement.node.lineno}" if made else ""
            found.append(f"`{receiver}.step()` at line {line} steps `{origin.name}`, made{at} "
                         f"{where(origin.scope)}, not where the loader is made")  # fmt: skip
        else:
            kind = kind_of(origin) or "neither an optimizer nor a scheduler"
            found.append(f"`{receiver}.step()` at line {line} steps a {kind}"
                         if kind in ("scheduler",) else
                         f"`{receiver}.step()` at line {line}: `{origin.name}` is {kind}")  # fmt: skip
    for call in unnamed:
        text = ast.unparse(call.node.func)
        found.append(f"`{text}()` at line {call.node.lineno} steps an object this file cannot "
                     "name")  # fmt: skip
    loaders = ", ".join(f"`{n}`" for n in facts.train_loaders) or "the DataLoader"
    looked = (f"looked for an optimizer made {where(owner)}, where {loaders} is made, and "
              f"stepped in {loop_words(loop)}")  # fmt: skip
    return (
        f"{looked}; found "
        + ("; ".join(found) if found else "no step() call")
        + ("; migrate by hand")
    )


def precision_switch(facts: TrainingFacts, scope: Scope, switch: ast.expr) -> str:
    """MIG900 when autocast's or the GradScaler's `enabled=` reads a value the Accelerator,
    made before training, cannot be given (a helper's parameter, a local of the helper)."""
    names = []
    for node in ast.walk(switch):
        name = patterns.root_name(node) if isinstance(node, (ast.Name, ast.Attribute)) else None
        if name is not None and name not in names and name not in ("torch", "self"):
            names.append(name)
    found = []
    for name in names:
        if scope.kind == "function" and name in scope.params:
            found.append(untraceable(facts, scope, name))
        elif scope.assigns(name):
            line = scope.assigns(name)[0].statement.node.lineno
            found.append(f"`{name}` is set at line {line} {where(scope)}")
    why = ": " + "; ".join(found) if found else ""
    return (
        f"mixed precision is switched by `enabled={ast.unparse(switch)}` at line "
        f"{switch.lineno}, a value the Accelerator cannot be given where it is made{why}; set "
        'mixed_precision= on the Accelerator by hand (`"fp16"` where this switch is on, '
        '`"no"` where it is off)'
    )


def runtime_dtype(dtype: ast.expr) -> str:
    """MIG900 when autocast's dtype is chosen at run time."""
    return (
        f"the autocast dtype `{ast.unparse(dtype)}` at line {dtype.lineno} is chosen at run "
        "time, not a literal torch.float16/bfloat16; set mixed_precision= on the Accelerator "
        'by hand (`"fp16"`, `"bf16"` or `"no"` to match it)'
    )
