"""What every rule is: a code, a name, a one-line summary, byte triggers, and `apply(context)`.

A rule reads the analysis (`context.facts`, `context.plan`) and registers edits and findings;
it never re-derives roles and never mutates the tree.
"""

from __future__ import annotations

import ast
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import ClassVar

from migrator.analysis.catalogue.patterns import expression_for, root_name
from migrator.analysis.effects.processes import Processes
from migrator.analysis.model.helper_library import HelperLibrary
from migrator.analysis.model.origins import argument_for, calls_of, class_methods, is_method
from migrator.analysis.placement.prepare_plan import PreparePlan
from migrator.analysis.roles.facts import INLINE_LOADER, TrainingFacts
from migrator.analysis.syntax.imports import ImportEntry, import_entries
from migrator.analysis.syntax.index import Block, Scope, Statement
from migrator.edits import EditSet, NewStatement, Render
from migrator.findings import Finding
from migrator.source import Source

IMPORT_SOURCES = {"runtime": "runtime", "accelerate": "accelerate"}


@dataclass(eq=False)
class AcceleratorNeed:
    """`accelerator` must exist in `scope` before `block.statements[index]` runs.

    A soft need (`soft` is the node whose edit created it) is dropped, edit and all, when the
    accelerator cannot exist yet at that point (a `print` before the arguments are parsed).
    """

    scope: Scope
    block: Block
    index: int
    soft: ast.AST | None = None
    inserted: str = ""  # the code put before `block.statements[index]` that needs it
    # where no accelerator can be seen: re-registers the edit on the process-wide state
    # (`PartialState().is_main_process`) instead of dropping it or refusing the file
    fallback: Callable[[], None] | None = None


@dataclass(eq=False)
class AcceleratorKwarg:
    """`Accelerator(name=code)`; `depends_on` are the names `code` reads."""

    name: str
    code: str
    depends_on: tuple[str, ...] = ()
    # the note left when the Accelerator cannot be made where this argument can be read: the
    # argument goes, not the migration (`cpu=`); None: the migration needs it
    unless_placed: Finding | None = None


@dataclass(eq=False)
class RuleContext:
    tree: ast.Module
    source: Source
    facts: TrainingFacts
    plan: PreparePlan
    edits: EditSet
    target: str = "runtime"
    selected: frozenset = frozenset()
    findings: list[Finding] = field(default_factory=list)
    needs: list[AcceleratorNeed] = field(default_factory=list)
    kwargs: list[AcceleratorKwarg] = field(default_factory=list)
    # (module, name, asname) imports to drop once nothing uses them (RemoveImportsVisitor)
    unused_imports: list[ImportEntry] = field(default_factory=list)
    accelerator_created: bool = False
    extra_imports: list[tuple[str, str | None]] = field(default_factory=list)
    # names imported from the Accelerator's module with it (`DistributedDataParallelKwargs`)
    accelerator_imports: list[str] = field(default_factory=list)
    blocked: bool = False  # a rule found the file cannot be migrated after all
    unwrapped_nodes: set[int] = field(default_factory=set)  # ids `unwrap` already wrapped
    # the program's modules that are imported but not joined: their helpers' bodies
    library: HelperLibrary = field(default_factory=HelperLibrary)
    data_parallel_removed: bool = False  # MIG901 took nn.DataParallel off a trained model

    @property
    def processes(self) -> Processes:
        """Which code of the input runs on every process (analysis/effects/processes.py)."""
        return self.facts.processes

    @property
    def accelerator(self) -> str:
        return self.facts.accelerator_name

    @property
    def import_source(self) -> str:
        return IMPORT_SOURCES[self.target]

    def accelerator_expr(self, attribute: str | None = None) -> str:
        """The code for the accelerator, or one of its attributes."""
        name = expression_for(self.accelerator)
        return f"{name}.{attribute}" if attribute else name

    def unwrapped(self) -> Render:
        """A render function: `expr` -> `accelerator.unwrap_model(expr)`."""
        unwrap = self.accelerator_expr("unwrap_model")
        return lambda text, _renderer: f"{unwrap}({text})"

    def unwrap(self, node: ast.AST) -> None:
        """`node` -> `accelerator.unwrap_model(node)`, once however many rules ask."""
        if id(node) not in self.unwrapped_nodes:
            self.unwrapped_nodes.add(id(node))
            self.edits.replace(node, self.unwrapped())

    def statement(self, code: str, blank_line_before: bool = False) -> NewStatement:
        return NewStatement(code, blank_line_before)

    def need_accelerator_at(self, statement: Statement, soft=None, fallback=None) -> None:
        self.needs.append(AcceleratorNeed(
            statement.block.scope, statement.block, statement.index, soft, fallback=fallback
        ))  # fmt: skip

    def main_process_flag(self, through_state: bool = False) -> str:
        """`accelerator.is_main_process`, or the process-wide state's where code cannot see
        the accelerator (`PartialState().is_main_process`, imported with the Accelerator)."""
        if not through_state:
            return self.accelerator_expr("is_main_process")
        return self.state_expr("is_main_process")

    def state_expr(self, attribute: str) -> str:
        """`PartialState().<attribute>`: the process-wide state's, where code cannot see the
        accelerator (imported with the Accelerator)."""
        if "PartialState" not in self.accelerator_imports:
            self.accelerator_imports.append("PartialState")
        return f"PartialState().{attribute}"

    def add_kwarg(self, name: str, code: str, depends_on=(), unless_placed=None) -> None:
        if all(kwarg.name != name for kwarg in self.kwargs):
            self.kwargs.append(AcceleratorKwarg(name, code, tuple(depends_on), unless_placed))

    def owner_expression(self, scope: Scope, expr: ast.expr, depth: int = 0):
        """(code, depends_on) for `expr` (a literal, a name or `name.attr`) as the owner of
        training would write it, following helper parameters to their arguments; None if the
        value only exists inside the helper."""
        code = self.source.text_of(expr).strip()
        if _is_literal(expr):
            return code, ()
        root = root_name(expr)
        if root is None:
            return self._compound_expression(scope, expr, code)
        if scope is self.facts.owner and root in scope.params:
            return code, (root,)  # `train(args)`'s own `args.accumulation`, whoever passes it
        passed = self._passed_by_callers(scope, root, depth)
        if passed is not None:  # `train_epoch(..., accum_steps)` called with `args.accum_steps`
            return passed[0] + code[len(root) :], passed[1]
        origin = self.facts.origin(scope, root)
        if origin is not None and _set_up_on_self(self.facts.owner, origin):
            return code, (origin.name,)
        if origin is None or origin.scope not in (self.facts.owner, self.facts.index.module_scope):
            return None
        if root != origin.name:
            code = origin.name + code[len(root) :]
        return code, (origin.name,)

    def _passed_by_callers(self, scope: Scope, name: str, depth: int):
        """A helper's parameter (never rebound) that every call of the helper fills with the
        same value the owner can write (`args.accum_steps` from `main()`): that value's
        (code, depends_on); None otherwise."""
        if depth > 2 or scope.kind != "function" or name not in scope.params:
            return None
        if scope.assigns(name):
            return None
        sites = calls_of(self.facts.index, scope)
        found = set()
        for site in sites:
            argument = argument_for(site.node, scope, name)
            if argument is None or site.scope is scope:
                return None
            value = self.owner_expression(site.scope, argument, depth + 1)
            if value is None:
                return None
            found.add(value)
        return found.pop() if len(found) == 1 else None

    def _compound_expression(self, scope: Scope, expr: ast.expr, code: str):
        """`args.amp and not args.cpu`, `dtype == "float16"` written where training is owned
        (or at module level): every name it reads is the owner's or the module's own."""
        owners = (self.facts.owner, self.facts.index.module_scope)
        if scope not in owners or any(
            isinstance(n, (ast.Call, ast.Lambda, ast.NamedExpr)) for n in ast.walk(expr)
        ):
            return None
        names = {n.id for n in ast.walk(expr) if isinstance(n, ast.Name)}
        for name in names:
            origin = self.facts.origin(scope, name)
            if origin is None or origin.scope not in owners or origin.name != name:
                return None
            bindings = origin.scope.bindings.get(name, [])
            if any(b.kind not in ("assign", "param") or b.loop is not None for b in bindings):
                return None  # a loop's value, an import: not one value before training
        plain = isinstance(expr, (ast.Compare, ast.UnaryOp)) or (
            isinstance(expr, ast.BoolOp) and isinstance(expr.op, ast.And)
        )
        if "\n" in code or not plain:
            code = f"({code})"  # joined with `and` into the Accelerator's condition
        return code, tuple(sorted(names))

    def local_name(self, scope: Scope, origin_name: str) -> str | None:
        """The name `scope` uses for the owner's object `origin_name`."""
        for name in [origin_name, *scope.params, *scope.bindings]:
            found = self.facts.origin(scope, name.lstrip("*"))
            if found is not None and found.name == origin_name and self.facts.held(found):
                return name
        return None

    def retire_imports(self, retired) -> None:
        """Ask for the module-level imports `retired(qualified)` accepts to be dropped once the
        edits leave nothing using them (`qualified` is `module` or `module.name`)."""
        for small in self.tree.body:
            for entry in import_entries(small):
                module, name, _ = entry
                if retired(f"{module}.{name}" if name else module):
                    self.unused_imports.append(entry)

    def retire_imports_of(self, rewritten: set[str]) -> None:
        """The imports that spelled the qualified names of calls a rule rewrote away
        (`from torch.nn.utils import clip_grad_norm_`, `from torch.cuda import amp`) go when
        unused; imports unused before the rewrite were not ours and are left."""
        self.retire_imports(
            lambda full: any(name == full or name.startswith(full + ".") for name in rewritten)
        )

    def block_file(self, finding: Finding) -> None:
        self.findings.append(finding)
        self.blocked = True

    def torch_name(self) -> str:
        """The local name of the torch module, importing it when the file has none."""
        for local, full in self.facts.index.imports.aliases.items():
            if full == "torch":
                return local
        if ("torch", None) not in self.extra_imports:
            self.extra_imports.append(("torch", None))
        return "torch"

    def need_accelerator_before(
        self, block: Block, index: int, inserted: str, fallback=None
    ) -> None:
        self.needs.append(
            AcceleratorNeed(block.scope, block, index, inserted=inserted, fallback=fallback)
        )

    def prepared(self, origin_name: str) -> bool:
        if origin_name in self.facts.prepared_already:
            return True
        if origin_name == INLINE_LOADER:  # MIG006 names and prepares it where it is built
            return "MIG006" in self.selected
        return "MIG006" in self.selected and self.plan.prepares(origin_name)

    def role(self, scope: Scope, name: str) -> str | None:
        return self.facts.role(scope, name)

    def prepared_role(self, scope: Scope, name: str) -> str | None:
        """The role of `name` in `scope` if the object it names is (or will be) prepared."""
        role = self.facts.role(scope, name)
        found = self.facts.origin(scope, name)
        if role is None or found is None or not self.prepared(found.name):
            return None
        return role


class Rule:
    """Declare `code`, `name`, `summary`, `triggers` (and `detector`) as class attributes
    before any method: migrator/rule_table.py reads them from the source, without importing."""

    code: ClassVar[str]
    name: ClassVar[str]
    summary: ClassVar[str]
    # Detectors only report findings, and run on every file that passes the prefilter, with or
    # without a training loop; a warning from a detector stops every rewrite of the file.
    detector: ClassVar[bool] = False
    # Substrings of the source without which this rule can have nothing to do (prefilter).
    triggers: ClassVar[tuple[str, ...]] = ("backward",)

    def apply(self, context: RuleContext) -> None:  # pragma: no cover - interface
        raise NotImplementedError


def _set_up_on_self(owner: Scope | None, origin) -> bool:
    """`self.steps`, set in `__init__` only, read by a method of the class that owns training:
    every method sees it, wherever the class makes `self.accelerator`."""
    if not is_method(owner) or not origin.name.startswith("self."):
        return False
    methods = class_methods(owner)
    if origin.scope not in methods or origin.scope.name != "__init__":
        return False
    return not any(m.assigns(origin.name) for m in methods if m is not origin.scope)


def _is_literal(expr: ast.expr) -> bool:
    """A number or a string (LibCST-era Integer/Float/SimpleString: not a bool or None)."""
    if not isinstance(expr, ast.Constant):
        return False
    value = expr.value
    return isinstance(value, (int, float, str, bytes)) and not isinstance(value, bool)
