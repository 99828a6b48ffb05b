"""What MIG900 says: what the analysis looked for and what it found instead, with the line
numbers of both (issue 16 item 4). Pure text built from the index; the analysis decides,
this module only words the decision.
"""

from __future__ import annotations

import ast

from migrator.analysis.catalogue import patterns
from migrator.analysis.model.origins import argument_for, call_sites_of, is_method, param_default
from migrator.analysis.roles.facts import TrainingFacts
from migrator.analysis.syntax.index import CallSite, Loop, Scope


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


def several_owners(facts: TrainingFacts, loaders: list, imports) -> str:
    """MIG900 when the training loops draw from names made in different scopes: several
    independent trainer classes, or loaders made in different functions."""
    classes: dict[int, tuple[Scope, list[Loop], list]] = {}
    for loop in facts.training_loops:
        if is_method(loop.scope):
            cls = loop.scope.parent
            classes.setdefault(id(cls), (cls, [], []))[1].append(loop)
    for origin in loaders:
        if is_method(origin.scope) and id(origin.scope.parent) in classes:
            classes[id(origin.scope.parent)][2].append(origin)
    if (
        len(classes) > 1
        and all(is_method(loop.scope) for loop in facts.training_loops)
        and all(origins for _cls, _loops, origins in classes.values())
    ):
        each = "; ".join(_trainer_class(cls, loops, origins, imports)
                         for cls, loops, origins in classes.values())  # fmt: skip
        return (f"{len(classes)} independent trainer classes train in this file, each over "
                f"loaders of its own: {each}; one migration prepares one owner's objects, so "
                "migrate one class at a time by hand (or move each class to its own module, "
                "which then migrates on its own)")  # fmt: skip
    if not loaders:  # loops over what they make themselves: rollouts, generated batches
        lines = ", ".join(str(loop.node.lineno) for loop in facts.training_loops)
        return (f"the training loops (lines {lines}) draw from no DataLoader: each trains on "
                "what it makes itself (rollouts, generated data), so N processes would train "
                "N replicas of it; sharing that work between processes is a design decision, "
                "by hand")  # fmt: skip
    found = ", ".join(_drawn_from(origin, imports) for origin in loaders)
    return (f"looked for one scope that makes every loader the training loops draw from; found "
            f"{found}; migrate by hand")  # fmt: skip


def _trainer_class(cls: Scope, loops: list[Loop], origins: list, imports) -> str:
    lines = ", ".join(str(loop.node.lineno) for loop in loops)
    plural = "s" if len(loops) > 1 else ""
    drawn = ", ".join(_drawn_from(origin, imports) for origin in origins)
    return f"`{cls.name}` (line {cls.node.lineno}; training loop{plural} at line{plural} {lines} over {drawn})"


def _drawn_from(origin, imports) -> str:
    """`train_loader` made at line 12 in `main()` (line 3); `lrs`, a parameter of `f()` (line
    8), defaulting to a list of constants: what a loop iterates, named for what it is."""
    scope, name = origin.scope, origin.name
    if scope.kind == "function" and name in scope.params and not scope.assigns(name):
        default = param_default(scope, name)
        what = f", defaulting to {_constants(default)}" if _constants(default) else ""
        return f"`{name}`, a parameter {where(scope)}{what}"
    made = scope.assigns(name)
    if not made:
        return f"`{name}` {where(scope)}"
    value = made[0].element if made[0].unpacked else made[0].value
    line = made[0].statement.node.lineno
    if _constants(value):
        return f"`{name}` {where(scope)}, {_constants(value)} (line {line}), not a DataLoader"
    if isinstance(value, ast.Name) and value.id in scope.params:
        return f"`{name}`, the parameter `{value.id}` kept at line {line} {where(scope)}"
    if isinstance(value, ast.Call) and patterns.is_loader_call(value, imports):
        return f"`{name}`, a DataLoader made at line {line} {where(scope)}"
    return f"`{name}`, bound at line {line} {where(scope)}"


def _constants(value: ast.expr | None) -> str:
    """`a list of constants` for `[1e-5, 2e-5]`, `range(...)`: a sweep's values."""
    if isinstance(value, (ast.List, ast.Tuple, ast.Set)) and all(
        isinstance(e, ast.Constant) for e in value.elts
    ):
        return f"a {type(value).__name__.lower()} of constants"
    if isinstance(value, ast.Call) and patterns.name_value(value.func) == "range":
        return "a range"
    return ""


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
    found = list(dict.fromkeys(found))  # two loops reaching one step: named once
    for call in unnamed:
        text = ast.unparse(call.node.func)
        found.append(f"`{text}()` at line {call.node.lineno} steps an object this file cannot "
                     "name")  # fmt: skip
    loaders = ", ".join(f"`{n}`" for n in facts.train_loaders) or "the DataLoader"
    verb = "is" if len(facts.train_loaders) < 2 else "are"
    looked = (f"looked for an optimizer made {where(owner)}, where {loaders} {verb} made or "
              f"received, and stepped in {loop_words(loop)}")  # fmt: skip
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
