"""What a training loop draws its batches from (`LoopSource`), read through the wrappers real
scripts put around a loader: `enumerate`, `tqdm`, `iter`, `islice`, `zip(a, b)`, MetricLogger's
`log_every(loader, ...)`, a same-file generator that yields the items of its argument
(`def cycle(dl): while True: yield from dl`), names bound to any of these wherever the binding
is (`progress_bar = tqdm(loader)`), and `next(it)` inside a `while True:` / `for i in range(n)`
loop with `it = iter(loader)` (minGPT). The loader is what gets prepared; the wrappers stay.

A mixin of LoopAnalysis (loops.py): it reads `self.index`, `self.imports`, `self.facts`.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field

from migrator.analysis.catalogue import patterns
from migrator.analysis.model.container_sources import ContainerSources
from migrator.analysis.model.origins import argument_for, is_method
from migrator.analysis.syntax.index import (
    Line,
    Loop,
    Scope,
    Statement,
    reaching_binding,
    target_names,
)


@dataclass(eq=False)
class LoopSource:
    """The loaders a loop draws batches from, as names seen from `scope`."""

    scope: Scope
    loaders: list[str]
    through_enumerate: bool = False  # the loop's first target is a counter
    batches: set[str] | None = None  # bound from `next(it)`; None: the loop's own targets
    batch_statements: set[int] = field(default_factory=set)  # ids of `batch = next(it)`
    inline: ast.Call | None = None  # `enumerate(DataLoader(ds, ...))`: the loader has no name
    # loaders a container holds with no name of their own here (`{"train": DataLoader(...)}`,
    # a dict comprehension, a helper's returned dict): (the value, the statement writing it),
    # prepared in place where the container is made
    held: list[tuple[ast.expr, Statement]] = field(default_factory=list)


class LoopSources(ContainerSources):
    def _loop_source(self, loop: Loop) -> LoopSource | None:
        key = id(loop)
        if key not in self._sources:
            self._sources[key] = self._find_loop_source(loop)
        return self._sources[key]

    def _find_loop_source(self, loop: Loop) -> LoopSource | None:
        if loop.iter is not None:
            found = self._unwrap(loop.iter, loop.scope, frozenset(), loop.statement)
            if found is not None:
                return found
        return self._iterator_source(loop)

    def _unwrap(
        self, expr: ast.expr, scope: Scope, seen: frozenset, at: Statement | None = None
    ) -> LoopSource | None:
        """The loaders whose items `expr` yields (None: not a loader's items we can name);
        `at`: the statement that reads `expr` (a loop's head)."""
        through = False
        while isinstance(expr, ast.Call):
            if patterns.is_loader_call(expr, self.imports):  # built in place: named by MIG006
                return LoopSource(scope, [], through, inline=expr)
            inner = self._wrapped(expr, scope)
            if not inner:
                return None
            if self.imports.qualify(expr.func) in ("enumerate", "tqdm.contrib.tenumerate"):
                through = True
            if len(inner) > 1:  # zip(a, b): every argument is a loader
                parts = [self._unwrap(e, scope, seen) for e in inner]
                if any(p is None or p.scope is not parts[0].scope or p.inline for p in parts):
                    return None
                return LoopSource(parts[0].scope, [n for p in parts for n in p.loaders], through,
                                  held=[h for p in parts for h in p.held])  # fmt: skip
            expr = inner[0]
        if isinstance(expr, ast.Subscript):  # `loaders[phase]`, `dataloaders["val"]`
            found = self._container_loaders(expr, scope)
            if found is not None:
                return LoopSource(found[0], found[1], through, held=found[2])
        name = patterns.name_of(expr) or self._held_loader(expr)  # `self.cfg.train_loader`
        if name is None:
            return None
        taken = self._loop_variable_loaders(name, scope)  # `for loader in (train, val):`
        if taken is not None:
            return LoopSource(taken[0], taken[1], through)
        bound = self._wrapper_binding(scope, name, seen, at)
        if bound is NOT_LOADER_ITEMS:
            return None
        if bound is not None:
            bound.through_enumerate = bound.through_enumerate or through
            return bound
        return LoopSource(scope, [name], through)

    def _wrapper_binding(self, scope: Scope, name: str, seen: frozenset, at=None):
        """`progress_bar = tqdm(loader)` / `it = iter(loader)` / `with tqdm(loader) as bar:`:
        what the name wraps, read where
        it is bound (every binding must wrap the same loaders, or the one just before `at` in
        its block reaches it: `t = tqdm(train_loader)` then `for b in t:`, later
        `t = tqdm(val_loader)`). NOT_LOADER_ITEMS: every binding wraps an iterable that is no
        loader (`pbar = tqdm(range(epochs))`)."""
        origin = self.facts.origin(scope, name)
        if origin is None or (id(origin.scope), origin.name) in seen:
            return None
        bindings = origin.scope.assigns(origin.name)
        if not bindings or any(b.kind not in ("assign", "with") or b.unpacked for b in bindings):
            return None  # `with tqdm(loader) as bar:` binds the bar (its __enter__ is itself)
        reaching = reaching_binding(bindings, at) if origin.scope is scope else None
        if reaching is not None and len(bindings) > 1:
            bindings = [reaching]
        seen = seen | {(id(origin.scope), origin.name)}
        if all(_batch_sequence(b.value, self.imports) for b in bindings):
            return NOT_LOADER_ITEMS  # `batches = list(zip(x.split(64), y.split(64)))`
        found: list[LoopSource] = []
        # `loop = tqdm(loader) if progress else loader`: each side is a binding of its own
        values = [side for b in bindings for side in _sides(b.value)]
        for value in values:
            if isinstance(value, ast.Subscript):  # `dataloader = dataloaders[phase]`
                held = self._container_loaders(value, origin.scope)
                if held is None:
                    return None
                found.append(LoopSource(held[0], held[1], held=held[2]))
                continue
            # `dataloader = train_dataloader` / `= val_dataloader`, by phase, or
            # `bar = tqdm(self.loader)` / `bar = self.loader` by a flag; one alias (and
            # `self.loader = loader`) is the loader itself
            named = isinstance(value, (ast.Name, ast.Attribute)) and patterns.name_of(value)
            alias = bool(named) and len(values) > 1 and "." not in name
            if not alias and (
                not isinstance(value, ast.Call) or not self._wrapped(value, origin.scope)
            ):
                return None
            source = self._unwrap(value, origin.scope, seen)
            if source is None or (alias and source.inline is not None):
                return NOT_LOADER_ITEMS if len(found) == 0 and len(values) == 1 else None
            found.append(source)
        first = found[0]
        if any(f.scope is not first.scope or f.inline is not None or f.batches is not None
               or f.through_enumerate != first.through_enumerate for f in found[1:]):  # fmt: skip
            return None
        if any(f.loaders != first.loaders or f.held != first.held for f in found):  # by phase:
            loaders = list(dict.fromkeys(n for f in found for n in f.loaders))  # `dl = train_dl`
            held = list({id(h[0]): h for f in found for h in f.held}.values())
            return LoopSource(first.scope, loaders, first.through_enumerate, held=held)
        return first

    def _wrapped(self, call: ast.Call, scope: Scope) -> list[ast.expr] | None:
        """The arguments whose items `call` yields, if it is a wrapper of iterables."""
        callee = self.imports.qualify(call.func)
        args = patterns.call_args(call)
        if callee in patterns.ZIP_WRAPPERS:
            if not args or any(not a.plain for a in args):
                return None
            return [a.value for a in args]
        attribute = call.func.attr if isinstance(call.func, ast.Attribute) else None
        if callee in patterns.ITEM_WRAPPERS or attribute in patterns.ITEM_WRAPPER_METHODS:
            first = args[0] if args else None
            if first is not None and (first.plain or first.keyword == "iterable"):
                return [first.value]
            return None
        for function in self._item_generators(call):
            param = self._yielded_param(function)
            argument = argument_for(call, function, param) if param is not None else None
            if argument is not None:
                return [argument]
        return None

    def _item_generators(self, call: ast.Call) -> list[Scope]:
        """Functions of this module `call` may run, by name (`cycle(dl)`, `logger.log(dl)`)."""
        if isinstance(call.func, ast.Name):
            found = self.index.functions.get(call.func.id)
            return [found] if found is not None else []
        if isinstance(call.func, ast.Attribute):
            return [s for s in self.index.scopes if s.kind == "function" and is_method(s)
                    and s.name == call.func.attr]  # fmt: skip
        return []

    def _yielded_param(self, function: Scope) -> str | None:
        """The parameter a generator yields the items of: `for x in param: ... yield ...` or
        `yield from param` (`def cycle(dl): while True: for b in dl: yield b`)."""
        params = [p for p in function.params if not p.startswith("*")]
        if not isinstance(function.node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            return None
        for node in ast.walk(function.node):
            if isinstance(node, ast.YieldFrom):
                name = patterns.name_value(node.value)
                if name in params:
                    return name
            if isinstance(node, (ast.For, ast.AsyncFor)):
                name = patterns.name_value(_strip_enumerate(node.iter))
                if name in params and any(isinstance(n, ast.Yield) for n in ast.walk(node)):
                    return name
        return None

    def _iterator_source(self, loop: Loop) -> LoopSource | None:
        """`batch = next(it)` inside the loop, `it` an iterator over a loader."""
        found: LoopSource | None = None
        for call in loop.calls:
            if call.scope is not loop.scope or self.imports.qualify(call.node.func) != "next":
                continue
            args = patterns.call_args(call.node)
            if not args or not args[0].plain:
                continue
            source = self._unwrap(args[0].value, loop.scope, frozenset())
            if source is None or not self._is_iterator(args[0].value, loop.scope):
                continue
            if any(self._is_iterator(ast.Name(id=n), source.scope) for n in source.loaders):
                continue  # an iterator over something this file cannot name
            batches = set()
            small = call.small
            if isinstance(small, ast.Assign) and small.value is call.node:
                for target in small.targets:
                    batches.update(name for name, _ in target_names(target))
            if found is None:
                found = LoopSource(source.scope, list(source.loaders), False, batches,
                                   inline=source.inline, held=list(source.held))  # fmt: skip
            elif source.scope is found.scope and source.inline is None:
                found.loaders += [n for n in source.loaders if n not in found.loaders]
                found.held += [h for h in source.held if h not in found.held]
                found.batches |= batches
            if found.scope is source.scope:
                found.batch_statements.add(id(small))
        return found

    def _is_iterator(self, expr: ast.expr, scope: Scope) -> bool:
        """`iter(...)`, a generator call, or a name bound to one: `next()` can draw from it."""
        if isinstance(expr, ast.Call):
            return self.imports.qualify(expr.func) in patterns.ITERATOR_CALLS or any(
                self._yielded_param(f) is not None for f in self._item_generators(expr)
            )
        name = patterns.name_of(expr)
        origin = self.facts.origin(scope, name) if name is not None else None
        if origin is None:
            return False
        bindings = origin.scope.assigns(origin.name)
        return bool(bindings) and all(
            b.value is not None and self._is_iterator(b.value, origin.scope) for b in bindings
        )

    def _inline_statement(self, loop, source):
        """Where a DataLoader built in place gets its name: before the loop, or before the
        binding of the wrapper the loop draws from (`it = cycle(DataLoader(...))`)."""
        for statement in [loop.statement, *(b.statement for bs in source.scope.bindings.values()
                                             for b in bs)]:  # fmt: skip
            node = statement.node
            parts = node.body if isinstance(node, Line) else [
                node.iter if isinstance(node, ast.For) else node]  # fmt: skip
            if any(inner is source.inline for part in parts for inner in ast.walk(part)):
                return statement if statement.block.kind != "suite" else None
        return None

    # -- training loops ----------------------------------------------------------------------


def _sides(value: ast.expr | None) -> list:
    """The values a binding may hold: both sides of `a if flag else b`, else the value."""
    if isinstance(value, ast.IfExp):
        return [*_sides(value.body), *_sides(value.orelse)]
    return [value]


def _strip_enumerate(expr: ast.expr) -> ast.expr:
    while isinstance(expr, ast.Call) and patterns.name_value(expr.func) in ("enumerate", "iter"):
        if not expr.args:
            break
        expr = expr.args[0]
    return expr


# `_wrapper_binding`: a name bound to a wrapper of something that is not a loader
NOT_LOADER_ITEMS = LoopSource(None, [], False)  # type: ignore[arg-type]

SEQUENCES = {"list", "tuple", "sorted", "reversed"}  # a Python sequence of what they are given
SPLITS = {"split", "chunk", "tensor_split", "array_split"}  # a tensor or array cut into parts
ARRAYS = {"torch.arange", "torch.linspace", "torch.tensor", "torch.randperm"}


def _batch_sequence(value: ast.expr | None, imports) -> bool:
    """A Python sequence of batches, not a loader: a list comprehension, `list(...)`
    (`list(zip(x.split(64), y.split(64)))`, even `list(loader)`: its batches, drawn once),
    `x.split(64)`, `torch.chunk(x, 8)`, an array of numbers (`np.arange(1, 20)`; a `range`
    is left to the explanation of what the loop iterates). `prepare` hands such a sequence
    back as it is: every process would iterate all of it."""
    if isinstance(value, ast.ListComp):
        return True
    if not isinstance(value, ast.Call):
        return False
    called = imports.qualify(value.func) or ""
    if called in SEQUENCES or called in ARRAYS or called.startswith("numpy."):
        return True  # `seeds = np.arange(1, 20)`: numbers, iterated as they are
    last = called.rsplit(".", 1)[-1] if called else getattr(value.func, "attr", "")
    return last in SPLITS
