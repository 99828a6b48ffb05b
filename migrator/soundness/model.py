"""What the obligations read of a migrated module: its index, call graph, which code runs on
every process, and the accelerator it made."""

from __future__ import annotations

import ast
from dataclasses import dataclass, field

from migrator.analysis.effects.processes import Processes
from migrator.analysis.effects.values import PerProcessValues
from migrator.analysis.model.calls import CallGraph
from migrator.analysis.syntax.index import ModuleIndex
from migrator.source import Source, quiet_parse


@dataclass(eq=False)
class OutputModel:
    tree: ast.Module
    source: Source
    index: ModuleIndex
    graph: CallGraph
    processes: Processes
    _values: PerProcessValues | None = field(default=None, repr=False)

    # what the analysis of the input knew each prepared object to be (name -> model,
    # optimizer, loader, scheduler): a parameter the program receives from callers elsewhere
    # is prepared by name, and its value alone does not say what it is
    roles: dict[str, str] = field(default_factory=dict)
    # the running sums MIG032 reduced: (the loop's first line, its last, the sum's name)
    reduced_sums: list[tuple[int, int, str]] = field(default_factory=list)

    @classmethod
    def read(cls, text: str, facts=None) -> OutputModel | None:
        """`facts`: the analysis of the input (TrainingFacts), for the roles of the objects
        it prepared. (Not the other names a joined program's calls use for its functions,
        `engine.train_one_epoch`: read with them, the check lets through programs whose
        native-DDP helpers MIG010 does not rewrite soundly yet.)"""
        try:
            tree = quiet_parse(text)
        except SyntaxError:
            return None
        source = Source(text)
        index = ModuleIndex(tree, source)
        if facts is not None:  # the project helpers the input calls that write (by name)
            index.imports.helper_effects = facts.index.imports.helper_effects
            index.imports.helper_draws = facts.index.imports.helper_draws
        graph = CallGraph(index)
        model = cls(tree, source, index, graph, Processes(index, graph))
        if facts is not None:
            model.roles = prepared_roles(facts)
        return model

    def values(self) -> PerProcessValues:
        """What each value of the module counts (analysis/effects/values.py), computed once."""
        if self._values is None:
            self._values = PerProcessValues(self.index, self.graph, self.roles)
        return self._values

    def accelerator_calls(self, methods: set[str]):
        """The calls `accelerator.<method>(...)` of the migrated module, for `methods`."""
        values = self.values()
        for site in self.index.calls():
            func = site.node.func
            if isinstance(func, ast.Attribute) and func.attr in methods and (
                "accelerator" in values.roles(func.value, site.scope)
            ):  # fmt: skip
                yield site

    def where(self, statement) -> str:
        """`in save_checkpoint()` / `at module level`, for messages."""
        scope = statement.block.scope
        if scope.kind == "module":
            return "at module level"
        parent = scope.parent
        name = (
            f"{parent.name}.{scope.name}"
            if parent is not None and parent.kind == "class"
            else scope.name
        )
        callers = self.processes.callers_on_every_process(scope)
        called = f", called at line {callers[0].node.lineno}" if callers else ""
        return f"in `{name}()`{called}"


def prepared_roles(facts) -> dict[str, str]:
    """{name: role} of the objects the analysis found (models, optimizers, loaders,
    schedulers), as `_prepared` in values.py reads them."""
    roles = {name: "model" for name in facts.models}
    roles |= {name: "optimizer" for name in facts.optimizers}
    roles |= {name: "loader" for name in [*facts.train_loaders, *facts.eval_loaders]}
    roles |= {role.name: "scheduler" for role in facts.schedulers}
    return roles
