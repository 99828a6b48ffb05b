"""MIG010 on `mp.spawn`: the spawned function loses its rank / world-size parameters (their
uses read the Accelerator), its direct callers lose the matching arguments, and the spawn becomes
one direct call with a comment saying how to launch. A part of mig010_native_ddp.py's migration,
kept in its own module for size."""

from __future__ import annotations

import ast

from migrator.analysis.distributed.facts import Spawn
from migrator.analysis.model.origins import is_method
from migrator.analysis.syntax.index import Line, Scope
from migrator.analysis.syntax.views import call_args, integer_text, name_value
from migrator.arglists import call_items, parameter_items
from migrator.rules.ddp_syntax import without_params


class SpawnMigration:
    edits: object
    index: object
    source: object

    def _drop_params(self, target: Scope, names: list[str]) -> None:
        params = [p for p in target.params if not p.startswith("*")]
        removed = {params.index(p) for p in names}
        function = target.node
        self.edits.replace(self.edits.params_of(function), lambda _t, r: without_params(
            parameter_items(r, function), function, removed).render())  # fmt: skip
        callee, offset = target.name, 0
        if is_method(target) and target.name == "__init__":  # `Trainer(...)` passes no `self`
            callee, offset = target.parent.name, 1
        for other in self.index.calls():  # direct calls elsewhere (`train(0, 1)` for one process)
            if name_value(other.node.func) == callee:
                args = call_args(other.node)
                positions = {
                    i for i, a in enumerate(args) if a.keyword is None and i + offset in removed
                } | {i for i, a in enumerate(args) if a.keyword is not None and a.keyword in names}
                self.edits.rewrite(
                    other.node,
                    lambda _t, r, c=other.node, p=positions: call_items(r, c).without(p).render(),
                    drops=[args[i].node for i in positions],
                )

    def _direct_call(self, spawn: Spawn) -> None:
        target, site = spawn.target, spawn.site
        kept = {id(v) for v in spawn.arguments}
        values, drops = [], [site.node.func]
        for position, arg in enumerate(call_args(site.node)):
            keyword = arg.keyword
            if keyword == "fn" or (keyword is None and position == 0):
                continue
            if keyword == "args" or (keyword is None and position == 1):
                for element in arg.value.elts:
                    value = element.value if isinstance(element, ast.Starred) else element
                    if id(value) in kept:
                        values.append(value)
                    else:
                        drops.append(value)
            else:
                drops.append(arg.node)

        def direct(_text: str, renderer) -> str:
            return f"{target.name}({', '.join(renderer.text_of(v) for v in values)})"

        self.edits.replace(site.node, direct, drops=drops)
        line = site.statement.node
        if isinstance(line, Line):
            trailer = self._trailer(line)
            if "#" not in trailer:
                comment = f"  # launch with: migrate launch --nproc {self._nprocs(spawn)} <script>"
                self.edits.replace(line, lambda text, _r: _commented(text, trailer, comment))

    def _trailer(self, line: Line) -> str:
        """What follows a line's last simple statement: `;`, spaces, comment, newline."""
        source = self.source
        return source.text[source.end(line.body[-1]) : source.line_end(line.end_lineno)]

    def _nprocs(self, spawn: Spawn) -> str:
        value = spawn.nprocs
        if name_value(value) is not None:
            bindings = spawn.site.scope.assigns(name_value(value))
            value = bindings[0].value if len(bindings) == 1 else None
        return integer_text(self.source, value) or "N"


def _commented(text: str, trailer: str, comment: str) -> str:
    """The line `text` (ending with `trailer`) with `comment` where its trailing spaces were
    (a trailing `;` keeps the spaces after it, as it always has)."""
    body = text[: len(text) - len(trailer)]
    stripped = trailer.lstrip(" \t\f")
    semicolon = ""
    if stripped.startswith(";"):
        rest = stripped[1:]
        after = rest.lstrip(" \t\f")
        semicolon = trailer[: len(trailer) - len(stripped)] + ";" + rest[: len(rest) - len(after)]
        stripped = after
    return body + semicolon + comment + stripped
