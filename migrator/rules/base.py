"""What every rule is: a code, a name, a one-line summary, byte triggers, and `apply(context)`.

A rule reads the analysis (`context.facts`, `context.plan`) and registers edits and findings;
it never re-derives roles and never mutates the tree.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar, Optional

import libcst as cst

from migrator.analysis.index import Block, Scope, Statement
from migrator.analysis.placement import PreparePlan
from migrator.analysis.roles import TrainingFacts
from migrator.edits import EMPTY_LINE, EditSet
from migrator.findings import Finding

IMPORT_SOURCES = {"runtime": "runtime", "accelerate": "accelerate"}


@dataclass(eq=False)
class AcceleratorNeed:
    """`accelerator` must exist in `scope` before `block.statements[index]` runs."""

    scope: Scope
    block: Block
    index: int


@dataclass(eq=False)
class RuleContext:
    module: cst.Module
    facts: TrainingFacts
    plan: PreparePlan
    edits: EditSet
    target: str = "runtime"
    selected: frozenset = frozenset()
    findings: list[Finding] = field(default_factory=list)
    needs: list[AcceleratorNeed] = field(default_factory=list)
    # (module, name, asname) imports to drop once nothing uses them (RemoveImportsVisitor)
    unused_imports: list[tuple[str, Optional[str], Optional[str]]] = field(default_factory=list)
    accelerator_created: bool = False

    @property
    def accelerator(self) -> str:
        return self.facts.accelerator_name

    @property
    def import_source(self) -> str:
        return IMPORT_SOURCES[self.target]

    def accelerator_expr(self, attribute: Optional[str] = None) -> cst.BaseExpression:
        name = cst.Name(self.accelerator)
        return cst.Attribute(value=name, attr=cst.Name(attribute)) if attribute else name

    def statement(self, code: str, blank_line_before: bool = False) -> cst.BaseStatement:
        node = cst.parse_statement(code, config=self.module.config_for_parsing)
        return node.with_changes(leading_lines=[EMPTY_LINE] if blank_line_before else [])

    def need_accelerator_at(self, statement: Statement) -> None:
        self.needs.append(AcceleratorNeed(statement.block.scope, statement.block, statement.index))

    def need_accelerator_before(self, block: Block, index: int) -> None:
        self.needs.append(AcceleratorNeed(block.scope, block, index))

    def prepared(self, origin_name: str) -> bool:
        if origin_name in self.facts.prepared_already:
            return True
        return "MIG006" in self.selected and self.plan.prepares(origin_name)

    def role(self, scope: Scope, name: str) -> Optional[str]:
        return self.facts.role(scope, name)

    def prepared_role(self, scope: Scope, name: str) -> Optional[str]:
        """The role of `name` in `scope` if the object it names is (or will be) prepared."""
        role = self.facts.role(scope, name)
        found = self.facts.origin(scope, name)
        if role is None or found is None or not self.prepared(found.name):
            return None
        return role


class Rule:
    code: ClassVar[str]
    name: ClassVar[str]
    summary: ClassVar[str]
    # Substrings of the source without which this rule can have nothing to do (prefilter).
    triggers: ClassVar[tuple[str, ...]] = ("backward",)

    def apply(self, context: RuleContext) -> None:  # pragma: no cover - interface
        raise NotImplementedError
