"""What the obligations read of a migrated module: its index, call graph, which code runs on
every process, and the accelerator it made."""

from __future__ import annotations

import ast
from dataclasses import dataclass

from migrator.analysis.effects.processes import Processes
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

    @classmethod
    def read(cls, text: str) -> OutputModel | None:
        try:
            tree = quiet_parse(text)
        except SyntaxError:
            return None
        source = Source(text)
        index = ModuleIndex(tree, source)
        graph = CallGraph(index)
        return cls(tree, source, index, graph, Processes(index, graph))

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
