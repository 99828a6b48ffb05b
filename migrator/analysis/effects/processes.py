"""Which code runs on every process, and which on the main process only.

A launched program runs its module code on every process; a function runs where the code that
calls (or names) it runs; a statement under a main-process guard runs on one process:
`if accelerator.is_main_process:`, `if rank == 0:`, `if args.local_rank in [-1, 0]:`,
`if not dist.get_rank():`, the `else:` of `if not accelerator.is_main_process:`, what follows
`if not is_main: return`, a function decorated `@accelerator.on_main_process`, and a name
bound to such a test (`master_process = ddp_rank == 0`).

Reach is by reference, not only by resolved call: a function named anywhere in code that runs
(`mp.spawn(train, ...)`, a callback) runs there too, and every method of a class named in code
that runs may run (its instances' methods are called through names this module cannot always
resolve). A function or method is main-only when every reference to it is guarded; a method,
when every call of a method of that name anywhere is. A module-level function or class nothing
here references is an entry for code elsewhere (an importer, a launcher): it runs on every
process; so does a method no running code here calls, where its class runs. A nested function
nothing references is dead.
"""

from __future__ import annotations

import ast

from migrator.analysis.distributed.facts import ENV_KINDS, LOCAL_PROCESS_INDEX, PROCESS_INDEX
from migrator.analysis.model.calls import CallGraph
from migrator.analysis.syntax.imports import dotted_name
from migrator.analysis.syntax.index import ModuleIndex, Scope, Statement

EVERY, MAIN, DEAD = "every process", "main process", "not run"
MAIN_FLAGS = {
    "is_main_process", "is_local_main_process", "is_master", "is_main", "is_master_process",
    "main_process", "is_rank_zero", "is_global_zero", "master_process", "is_master_proc",
    "master_proc", "is_main_proc", "is_chief",
}  # fmt: skip
MAIN_DECORATORS = {"on_main_process", "on_local_main_process", "rank_zero_only"}
RANK_CALLS = {"get_rank", "get_local_rank", "get_global_rank"}
EXITS = (ast.Return, ast.Continue, ast.Raise)


class Processes:
    def __init__(self, index: ModuleIndex, graph: CallGraph | None = None) -> None:
        self.index = index
        self.graph = graph or CallGraph(index)
        self.status: dict[int, str] = {}
        self._guards: dict[int, bool] = {}
        self._by_method: dict[str, list] = {}
        for site in index.calls():
            if site.method is not None:
                self._by_method.setdefault(site.method, []).append(site)
        self._references_of: dict[int, list] = {}
        self._partly: set[int] | None = None
        self._solve()

    def runs_on_every_process(self, statement: Statement) -> bool:
        scope = statement.block.scope
        return self.status.get(id(scope), DEAD) == EVERY and not self.guarded(statement)

    def scope_status(self, scope: Scope) -> str:
        return self.status.get(id(scope), DEAD)

    def partly_main(self, scope: Scope) -> bool:
        """Does some run of `scope` happen on the main process only: one of its calls is
        guarded (`if rank == 0 and step % k == 0: evaluate(...)` beside an `evaluate(...)`
        every process runs), or made in a function that is partly main? Its status says
        every process; a collective in it would still wait for processes that never come,
        and a DDP forward in it would sync with them."""
        if self._partly is None:
            self._partly = self._solve_partly()
        return id(scope) in self._partly

    def guarded(self, statement: Statement) -> bool:
        """Under a main-process guard within its own scope."""
        key = id(statement)
        if key not in self._guards:
            self._guards[key] = self._guarded(statement)
        return self._guards[key]

    def callers_on_every_process(self, scope: Scope) -> list:
        """The calls of `scope` that run on every process (for messages)."""
        return [
            site for site in self.graph.callers(scope)
            if self.status.get(id(site.scope)) == EVERY and not self.guarded(site.statement)
        ]  # fmt: skip

    # -- solving -----------------------------------------------------------------------------
    def _solve(self) -> None:
        module = self.index.module_scope
        self.status[id(module)] = EVERY
        changed = True
        while changed:
            changed = False
            for scope in self.index.scopes:
                if scope is module:
                    continue
                found = self._status_of(scope)
                if found != self.status.get(id(scope), DEAD):
                    self.status[id(scope)] = found
                    changed = True

    def _status_of(self, scope: Scope) -> str:
        if scope.kind not in ("class", "function"):
            return DEAD
        if scope.kind == "function" and self._main_decorated(scope):
            return MAIN
        parent = scope.parent
        if scope.kind == "function" and parent is not None and parent.kind == "class":
            return self._method_status(scope)
        references = self._sites_of(scope)
        if not references and parent is self.index.module_scope:
            return EVERY  # nothing here runs it: an entry for code elsewhere, on every process
        return self._from_references(scope, references)

    def _method_status(self, method: Scope) -> str:
        cls = method.parent
        if self.status.get(id(cls), DEAD) == DEAD:
            return DEAD
        statuses = [self._context(scope, statement) for scope, statement in self._sites_of(method)]
        if method.name.startswith("__") or all(status == DEAD for status in statuses):
            # dunders run implicitly; a method no running code here calls (`trainer.train()`
            # in another file; `self.gen.train()` in its own dead helpers is another `train`)
            # is an entry for code elsewhere, and runs where its class does
            return self.status[id(cls)]
        return self._join(statuses)

    def _solve_partly(self) -> set[int]:
        partly = {id(s) for s in self.index.scopes if self.status.get(id(s)) == MAIN}
        changed = True
        while changed:
            changed = False
            for scope in self.index.scopes:
                if id(scope) in partly or scope.kind != "function":
                    continue
                for caller, statement in self._sites_of(scope):
                    if id(caller) in partly or (
                        self.status.get(id(caller)) == EVERY and self.guarded(statement)
                    ):
                        partly.add(id(scope))
                        changed = True
                        break
        return partly

    def _sites_of(self, scope: Scope) -> list[tuple[Scope, Statement]]:
        """Where `scope` is called (a method: by its name anywhere, each call once) or named."""
        parent = scope.parent
        if parent is not None and parent.kind == "class":
            sites = {id(site): site for site in [*self._by_method.get(scope.name, []),
                                                 *self.graph.callers(scope)]}  # fmt: skip
            return [(site.scope, site.statement) for site in sites.values()]
        return self._references(parent, scope.name)

    def _references(self, scope: Scope | None, name: str) -> list[tuple[Scope, Statement]]:
        """Where code reads `name` meaning the function or class `scope` defines."""
        key = (id(scope), name)
        if key not in self._references_of:
            self._references_of[key] = self._find_references(scope, name)
        return self._references_of[key]

    def _find_references(self, scope: Scope | None, name: str) -> list[tuple[Scope, Statement]]:
        found = []
        for seen in [scope, *scope.descendants()] if scope is not None else []:
            if seen is not scope and (name in seen.params or seen.is_local(name)):
                continue
            for use in seen.uses.get(name, []):
                found.append((seen, use.statement))
        for alias, target in self.index.aliases.items():  # a joined program's other names
            if target == name:
                for site in self.index.calls():
                    if dotted_name(site.node.func) == alias:
                        found.append((site.scope, site.statement))
        return found

    def _from_references(self, scope: Scope, references) -> str:
        return self._join([self._context(s, statement) for s, statement in references])

    def _context(self, scope: Scope, statement: Statement) -> str:
        status = self.status.get(id(scope), DEAD)
        if status == EVERY and self.guarded(statement):
            return MAIN
        return status

    @staticmethod
    def _join(statuses: list[str]) -> str:
        if EVERY in statuses:
            return EVERY
        return MAIN if MAIN in statuses else DEAD

    def _main_decorated(self, scope: Scope) -> bool:
        for decorator in getattr(scope.node, "decorator_list", []):
            name = dotted_name(decorator.func if isinstance(decorator, ast.Call) else decorator)
            if name is not None and name.rsplit(".", 1)[-1] in MAIN_DECORATORS:
                return True
        return False

    # -- guards ------------------------------------------------------------------------------
    def _guarded(self, statement: Statement) -> bool:
        chain = statement.chain()
        for depth, outer in enumerate(chain[:-1]):
            inner = chain[depth + 1]
            node = outer.node
            if isinstance(node, ast.If) and self._in_main_branch(node, inner, outer.block.scope):
                return True
        for outer in chain:  # `if not is_main: return` earlier in an enclosing block
            for earlier in outer.block.statements[: outer.index]:
                if (
                    isinstance(earlier, ast.If)
                    and not earlier.orelse
                    and self.main_test(earlier.test, outer.block.scope) is False
                    and all(isinstance(s, EXITS) for s in earlier.body[-1:])
                ):
                    return True
        return False

    def in_rank_branch(self, statement: Statement) -> bool:
        """Is `statement` in a branch of an `if`/`elif` chain that a main-process (or rank)
        test decides - the main one's, or the others' (`else:` of `if is_main_process:`)?
        Not every process reaches it: a collective placed there waits forever."""
        chain = statement.chain()
        for depth, outer in enumerate(chain[:-1]):
            node, inner = outer.node, chain[depth + 1]
            test: ast.If | None = node if isinstance(node, ast.If) else None
            while test is not None:
                if self.main_test(test.test, outer.block.scope) is not None:
                    return True
                if inner.block.owner is test:
                    break
                test = test.orelse[0] if len(test.orelse) == 1 else None
                test = test if isinstance(test, ast.If) else None
        return False

    def _in_main_branch(self, node: ast.If, inner: Statement, scope: Scope) -> bool:
        """Whether `inner`, in a branch of the `if`/`elif` chain `node`, runs only where a
        main-process test holds: its own branch's test is one, or an earlier branch's test
        holds on every process but the main one."""
        test: ast.If | None = node
        while test is not None:
            verdict = self.main_test(test.test, scope)
            if inner.block.owner is test and inner.block.field == "body":
                return verdict is True
            if verdict is False:
                return True  # `if not is_main: ...` then this `else`/`elif` branch
            nested = test.orelse[0] if len(test.orelse) == 1 else None
            if inner.block.owner is test or not isinstance(nested, ast.If):
                return False
            test = nested
        return False

    def main_test(self, test: ast.expr, scope: Scope, depth: int = 0) -> bool | None:
        """True: the test holds on the main process only; False: it holds on every process
        but the main one; None: neither, or cannot tell."""
        if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
            inner = self.main_test(test.operand, scope, depth)
            return None if inner is None else not inner
        if isinstance(test, ast.BoolOp):
            verdicts = [self.main_test(v, scope, depth) for v in test.values]
            if isinstance(test.op, ast.And):
                return True if True in verdicts else None
            return False if False in verdicts else None
        if isinstance(test, ast.Attribute) and test.attr in MAIN_FLAGS:
            return True
        if _is_rank(test) and "rank" in (dotted_name(getattr(test, "func", test)) or "").lower():
            return False  # `if rank:`, `if dist.get_rank():` hold on every process but rank 0
        if isinstance(test, ast.Call):
            name = dotted_name(test.func) or ""
            return True if name.rsplit(".", 1)[-1] in MAIN_FLAGS else None
        if isinstance(test, ast.Compare) and len(test.ops) == 1:
            return _rank_compare(test)
        if isinstance(test, ast.Name) and depth < 3:
            return self._bound_test(test.id, scope, depth)
        return None

    def _bound_test(self, name: str, scope: Scope, depth: int) -> bool | None:
        """`master_process = ddp_rank == 0`, then `if master_process:`."""
        current: Scope | None = scope
        while current is not None and name not in current.bindings:
            current = current.parent
        if current is None:
            return None
        verdicts = set()
        for binding in current.bindings[name]:
            value = binding.element if binding.unpacked else binding.value
            if binding.kind != "assign" or value is None:
                return None
            verdicts.add(self.main_test(value, current, depth + 1))
        return verdicts.pop() if len(verdicts) == 1 else None


def _rank_compare(test: ast.Compare) -> bool | None:
    left, op, right = test.left, test.ops[0], test.comparators[0]
    if isinstance(left, ast.BinOp) and isinstance(left.op, ast.Mod) and _is_rank(left.left):
        left = left.left  # `args.rank % ngpus_per_node == 0`: the first process of each node
    if _is_rank(right) and not _is_rank(left):
        left, right = right, left
        op = {ast.Gt: ast.Lt(), ast.Lt: ast.Gt(), ast.GtE: ast.LtE(), ast.LtE: ast.GtE()}.get(
            type(op), op
        )
    if not _is_rank(left):
        return None
    if isinstance(op, (ast.In, ast.NotIn)) and isinstance(right, (ast.List, ast.Tuple, ast.Set)):
        values = {_int(e) for e in right.elts}
        if 0 in values and values <= {0, -1}:
            return isinstance(op, ast.In)
        return None
    value = _int(right)
    if isinstance(op, (ast.Eq, ast.Is)) and value == 0:
        return True
    if isinstance(op, (ast.NotEq, ast.IsNot)) and value == 0:
        return False
    if isinstance(op, ast.LtE) and value == 0:
        return True
    if isinstance(op, ast.Gt) and value == 0:
        return False
    return None


def _is_rank(expr: ast.expr) -> bool:
    if isinstance(expr, ast.Call):
        if isinstance(expr.func, ast.Name) and expr.func.id == "int" and expr.args:
            return _is_rank(expr.args[0])
        name = dotted_name(expr.func) or ""
        if name.rsplit(".", 1)[-1] in RANK_CALLS:
            return True
        if name in ("os.environ.get", "os.getenv") and expr.args:
            return _is_rank(expr.args[0])
        return False
    if isinstance(expr, ast.Subscript):  # `os.environ["RANK"]`
        return dotted_name(expr.value) == "os.environ" and _is_rank(expr.slice)
    if isinstance(expr, ast.Constant) and isinstance(expr.value, str):
        return ENV_KINDS.get(expr.value) in (PROCESS_INDEX, LOCAL_PROCESS_INDEX)
    name = dotted_name(expr)
    if name is None:
        return False
    last = name.rsplit(".", 1)[-1].lower()
    return ("rank" in last and "node" not in last) or last in (
        "process_index", "local_process_index", "gpu", "gpu_id", "local_gpu", "device_id",
    )  # fmt: skip


def _int(expr: ast.expr) -> int | None:
    if isinstance(expr, ast.UnaryOp) and isinstance(expr.op, ast.USub):
        inner = _int(expr.operand)
        return -inner if inner is not None else None
    if isinstance(expr, ast.Constant) and isinstance(expr.value, int):
        return expr.value
    return None
