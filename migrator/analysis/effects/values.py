"""Per-process values: what a value of a migrated program counts, on each process.

A process of a migrated program iterates only its share of each prepared loader, so what it
computes from the batches counts its share: a `LOCAL` value (a loss, a correct count, a sum
of per-batch losses, `len(loader)` of a prepared loader: the batches this process sees).
`accelerator.gather(...)`, `gather_for_metrics`, `reduce` and `gather_object` make a value
`GLOBAL`: the whole data's, the same on every process; so does a size that counts the whole
data set (`len(loader.dataset)`, `len(dataset)`) and a per-process count times the number of
processes. Everything else is `CONST` (the same on every process: literals, arguments,
configuration, epoch counters). Arithmetic that mixes a `LOCAL` with a `GLOBAL` value is
`MIXED`: a whole-data correct count over this process's sample count is N times the real
accuracy. A name bound to a `LOCAL` or a `GLOBAL` value, a tuple or an f-string of both, is
not mixed: it holds one or the other (`LOCAL` wins, being the one that may be wrong).

Values flow through assignments, augmented assignments (a running sum is what it adds up),
tuple unpacking, loops (the items of a prepared loader, through `enumerate`/`zip`/`tqdm`-like
wrappers, are `LOCAL`; an `enumerate` counter is not), attributes on `self` across methods,
and calls: a call of one of the module's functions is that function's returns evaluated with
that call's arguments (context-sensitive, one summary per argument values); any other call
counts what its receiver and arguments count. Within a function the flow is flow-sensitive
(after `output, target = accelerator.gather_for_metrics((output, target))` the names hold the
gathered values; branches join; loops repeat until nothing changes). What each expression
held, in every context where it ran, is recorded for the obligations (`extents`).
"""

from __future__ import annotations

import ast

from migrator.analysis.catalogue import patterns
from migrator.analysis.effects.extents import (
    CONST,
    LOCAL,
    LOCAL_ITEMS,
    MIXED,
    NOTHING,
    Value,
    arithmetic,
    join,
)
from migrator.analysis.effects.frames import Frame, assigned_names, joined
from migrator.analysis.effects.prepared_objects import PreparedObjects
from migrator.analysis.effects.value_expressions import ValueExpressions
from migrator.analysis.model.calls import CallGraph
from migrator.analysis.model.forwards import forwarded
from migrator.analysis.model.origins import argument_for
from migrator.analysis.syntax.index import ModuleIndex, Scope

MAX_ROUNDS = 8
FILLS = {"append", "extend", "add", "insert", "update", "appendleft"}  # a container filled
MAX_DEPTH = 3  # nested summaries of module functions
RUNS = {"forward", "generate"}  # a prepared model's methods that run its forward


class PerProcessValues(PreparedObjects, ValueExpressions):
    def __init__(
        self, index: ModuleIndex, graph: CallGraph | None = None, roles: dict | None = None
    ) -> None:
        self.index = index
        self.graph = graph or CallGraph(index)
        self.known = roles or {}  # what the analysis knew a prepared object to be, by name
        self.imports = index.imports
        self.names: dict[tuple[int, str], Value] = {}  # every binding of a name, joined
        # what the calls pass a function's parameters (not what its body rebinds them to)
        self.passed: dict[tuple[int, str], Value] = {}
        self.returns: dict[int, Value] = {}  # every return of a function, joined
        self.seen: dict[int, set[str]] = {}  # id(expression) -> its extents, every context
        self.roles_seen: dict[int, frozenset] = {}
        self.sites = {id(site.node): site for site in index.calls()}
        self._globals: dict[str, Value | None] = {}  # module globals read prepared
        self._summaries: dict[tuple, Value] = {}
        self._active: list[int] = []
        self._changed = False
        self._frame = Frame()
        for _round in range(MAX_ROUNDS):
            self._changed = False
            self._summaries.clear()
            for scope in index.scopes:
                called = scope.kind == "function" and self.graph.callers(scope)
                if scope.kind != "class" and not called:  # called ones: with each call's values
                    self._walk(scope, self._caller_parameters(scope))
            if not self._changed:
                break

    # -- what the obligations ask --------------------------------------------------------------
    def extents(self, expr: ast.AST, scope: Scope) -> set[str]:
        """What `expr` held in every context where it ran (what it would hold, if it never
        ran)."""
        if id(expr) in self.seen:
            return self.seen[id(expr)]
        return {self._outside(expr, scope).extent}

    def roles(self, expr: ast.AST, scope: Scope) -> frozenset:
        if id(expr) in self.roles_seen:
            return self.roles_seen[id(expr)]
        return self._outside(expr, scope).roles

    def differs(self, expr: ast.AST, scope: Scope) -> bool:
        """May `expr` hold a different value on each process (a value of its share of the
        data, not a count of its loop passes, which the prepared loader evens out)?"""
        extents = self.extents(expr, scope)
        if MIXED in extents:
            return True
        return LOCAL in extents and not self.roles(expr, scope) & {"iterations", "batchsize"}

    def runs_model(self, call: ast.Call, scope: Scope) -> bool:
        """`model(x)` / `model.forward(x)` / `model.generate(x)` on a prepared model; not its
        other methods (`model.named_parameters()`, `model.state_dict()`, `model.eval()`),
        which run no forward."""
        func = forwarded(call.func)
        if "model" in self.roles(func, scope):  # `model(x)`, `self.model(x)`
            return True
        return (
            isinstance(func, ast.Attribute)
            and func.attr in RUNS
            and "model" in self.roles(func.value, scope)
        )

    def _outside(self, expr: ast.AST, scope: Scope) -> Value:
        saved, self._frame = self._frame, Frame()
        try:
            return self._evaluate(expr, scope)
        finally:
            self._frame = saved

    # -- walking -------------------------------------------------------------------------------
    def _walk(self, scope: Scope, parameters: dict[str, Value]) -> Value:
        """`scope`'s body with its parameters bound to `parameters`: what it returns."""
        saved, self._frame = self._frame, Frame(dict(parameters), assigned_names(scope.node))
        self._frame.locals |= set(parameters)
        try:
            self._statements(scope, scope.node.body)
            if self._frame.yielded is not None:  # a generator: an iterator over what it yields
                return Value(self._frame.yielded.extent, frozenset({"iterator"}))
            return self._frame.returned or NOTHING
        finally:
            self._frame = saved

    def _caller_parameters(self, scope: Scope) -> dict[str, Value]:
        """A function's parameters as every caller passes them (joined): a parameter the
        body rebinds later (`loss="ce"`, then `loss = criterion(...)`) holds on entry what
        the calls pass, not what the body binds."""
        found: dict[str, Value] = {}
        if scope.kind != "function":
            return found
        for param in scope.params:
            name = param.lstrip("*")
            found[name] = self.passed.get((id(scope), name), NOTHING)
        return found

    def _summary(self, callee: Scope, call: ast.Call, scope: Scope) -> Value:
        """What `callee` returns for this call's arguments."""
        parameters = {}
        for param in callee.params:
            name = param.lstrip("*")
            argument = argument_for(call, callee, name)
            value = self._eval(argument, scope) if argument is not None else NOTHING
            parameters[name] = value
            self._bind_flat(callee, name, value)  # for closures reading it
            self._pass(callee, name, value)  # what every caller passes, for _caller_...
        if id(callee) in self._active or len(self._active) >= MAX_DEPTH:
            # not walked again here (a recursion, or nested too deep): what it returned in
            # the contexts walked, and what its arguments count, as for a call this engine
            # does not read (a loss helper four calls down sums this process's batch)
            counted = join(*parameters.values()).extent if parameters else CONST
            return join(self.returns.get(id(callee), NOTHING), Value(counted))
        key = (id(callee), tuple(sorted(parameters.items(), key=lambda item: item[0])))
        if key not in self._summaries:
            self._active.append(id(callee))
            try:
                self._summaries[key] = self._walk(callee, parameters)
            finally:
                self._active.pop()
        return self._summaries[key]

    # -- binding -------------------------------------------------------------------------------
    def _bind(self, scope: Scope, name: str, value: Value) -> None:
        if not name.startswith("self.") and name in self._frame.locals:
            self._frame.state[name] = value  # this function's own variable, from here on
        self._bind_flat(self._owner(scope, name) or scope, name, value)

    def _bind_flat(self, owner: Scope, name: str, value: Value) -> None:
        key = (id(owner), name)
        old = self.names.get(key)
        new = value if old is None else join(old, value)
        if new != old:
            self.names[key] = new
            self._changed = True

    def _pass(self, callee: Scope, name: str, value: Value) -> None:
        key = (id(callee), name)
        old = self.passed.get(key)
        new = value if old is None else join(old, value)
        if new != old:
            self.passed[key] = new
            self._changed = True

    def _owner(self, scope: Scope, name: str) -> Scope | None:
        """The scope whose variable `name` is (a method's `self.x`: the class's)."""
        if name.startswith("self."):
            current: Scope | None = scope
            while current is not None and current.kind != "class":
                current = current.parent
            return current
        current = scope
        while current is not None:
            own = name in current.bindings or name in current.params
            if current.kind != "class" and own and name not in current.declared_global:
                return current
            current = current.parent
        module = self.index.module_scope
        declared = any(name in s.declared_global for s in self.index.scopes)  # `global accelerator`
        return module if name in module.bindings or declared else None

    def _lookup(self, scope: Scope, name: str) -> Value:
        if name in self._frame.state:
            return self._frame.state[name]
        if name in self._frame.locals:
            return NOTHING  # not bound yet on this path
        owner = self._owner(scope, name)
        if owner is None:
            return NOTHING
        if owner is not scope and owner is self.index.module_scope:
            final = self._prepared_global(name)
            if final is not None:
                return final
        return self.names.get((id(owner), name), NOTHING)

    def _assign(self, scope: Scope, target: ast.AST, value: Value, source: ast.AST | None) -> None:
        name = patterns.name_of(target)
        if name is not None:
            self._bind(scope, name, value)
            return
        if isinstance(target, (ast.Tuple, ast.List)):
            prepared = self._prepared_parts(source, scope)
            for position, element in enumerate(target.elts):
                part = prepared[position] if prepared and position < len(prepared) else None
                element = element.value if isinstance(element, ast.Starred) else element
                self._assign(scope, element, part or Value(value.extent), None)
        elif isinstance(target, (ast.Subscript, ast.Attribute)):  # `results[k] = v`, `o.x = v`
            root = target
            while isinstance(root, (ast.Subscript, ast.Attribute)):
                root = root.value
            name = patterns.name_of(root)
            if name is not None:
                self._bind(scope, name, join(self._lookup(scope, name), Value(value.extent)))

    def _statements(self, scope: Scope, body: list[ast.stmt]) -> None:
        for node in body:
            self._statement(scope, node)

    def _statement(self, scope: Scope, node: ast.stmt) -> None:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            return  # scopes of their own
        if isinstance(node, ast.Assign):
            value = self._eval(node.value, scope)
            for target in node.targets:
                self._assign(scope, target, value, node.value)
        elif isinstance(node, ast.AnnAssign) and node.value is not None:
            self._assign(scope, node.target, self._eval(node.value, scope), node.value)
        elif isinstance(node, ast.AugAssign):
            value = arithmetic(
                node.op, self._eval(node.target, scope), self._eval(node.value, scope)
            )
            value = Value(value.extent, value.roles - {"batchsize"})  # a sum of sizes: a share
            if isinstance(node.op, ast.Add) and isinstance(node.value, ast.Constant):
                value = Value(value.extent, value.roles | {"iterations"})  # `steps += 1`
            self._assign(scope, node.target, value, None)
        elif isinstance(node, (ast.For, ast.AsyncFor, ast.While)):
            self._loop(scope, node)
        elif isinstance(node, ast.If):
            self._eval(node.test, scope)
            before = dict(self._frame.state)
            self._statements(scope, node.body)
            after_body, self._frame.state = self._frame.state, before
            self._statements(scope, node.orelse)
            self._frame.state = joined(after_body, self._frame.state)
        elif isinstance(node, (ast.With, ast.AsyncWith)):
            for item in node.items:
                value = self._eval(item.context_expr, scope)
                if item.optional_vars is not None:
                    self._assign(scope, item.optional_vars, value, item.context_expr)
            self._statements(scope, node.body)
        elif isinstance(node, ast.Expr) and isinstance(node.value, (ast.Yield, ast.YieldFrom)):
            inner = node.value.value
            if isinstance(node.value, ast.YieldFrom):
                value = self._items(inner, scope) if inner is not None else NOTHING
            else:
                value = self._eval(inner, scope) if inner is not None else NOTHING
            frame = self._frame
            frame.yielded = value if frame.yielded is None else join(frame.yielded, value)
        elif isinstance(node, ast.Expr):
            value = self._eval(node.value, scope)
            call = node.value
            func = call.func if isinstance(call, ast.Call) else None
            if isinstance(func, ast.Attribute) and func.attr in FILLS and call.args:
                container = func.value
                while isinstance(container, ast.Subscript):  # `self.history["acc"].append(a)`
                    container = container.value
                held = patterns.name_of(container)  # `losses.append(loss.item())`
                if held is not None:
                    added = join(*(self._eval(a, scope) for a in call.args))
                    filled = Value(added.extent, frozenset({"filled"}))  # one item per pass
                    self._bind(scope, held, join(self._lookup(scope, held), filled))
            del value
        elif isinstance(node, ast.Return) and node.value is not None:
            value = self._eval(node.value, scope)
            frame = self._frame
            frame.returned = value if frame.returned is None else join(frame.returned, value)
            old = self.returns.get(id(scope))
            new = value if old is None else join(old, value)
            if new != old:
                self.returns[id(scope)] = new
                self._changed = True
        else:
            for field in ("body", "orelse", "finalbody"):
                self._statements(scope, getattr(node, field, []) or [])
            for handler in getattr(node, "handlers", []) or []:
                self._statements(scope, handler.body)
            for case in getattr(node, "cases", []) or []:
                self._statements(scope, case.body)

    def _loop(self, scope: Scope, node: ast.For | ast.AsyncFor | ast.While) -> None:
        """The body as often as it takes for what its names hold to stop changing (a running
        sum holds what it adds up), joined with the state before it (zero passes)."""
        before = dict(self._frame.state)
        for _pass in range(3):
            entry = dict(self._frame.state)
            if isinstance(node, ast.While):
                self._eval(node.test, scope)
            else:
                self._loop_targets(scope, node.target, node.iter)
            self._statements(scope, node.body)
            self._frame.state = joined(entry, self._frame.state)
            if self._frame.state == entry:
                break
        self._frame.state = joined(before, self._frame.state)
        self._statements(scope, node.orelse)

    def _loop_targets(self, scope: Scope, target: ast.AST, iterable: ast.AST) -> None:
        counted = isinstance(iterable, ast.Call) and patterns.name_of(iterable.func) == "enumerate"
        items = self._items(iterable, scope)
        if counted and isinstance(target, ast.Tuple) and len(target.elts) == 2:
            self._assign(scope, target.elts[0], NOTHING, None)  # the counter: same everywhere
            self._assign(scope, target.elts[1], items, None)
            return
        self._assign(scope, target, items, None)

    def _items(self, iterable: ast.AST, scope: Scope) -> Value:
        """What iterating `iterable` yields."""
        value = self._eval(iterable, scope)
        if value.roles & {"loader", LOCAL_ITEMS}:
            return Value(LOCAL)
        if isinstance(iterable, ast.Call) and not value.roles:  # `enumerate(loader)`, `tqdm(it)`
            wrapped = [a for a in iterable.args
                       if self._eval(a, scope).roles & {"loader", "iterator"}]  # fmt: skip
            if wrapped:
                return join(*(self._items(a, scope) for a in wrapped))
        return Value(value.extent)  # an iterator's items count what it yields
