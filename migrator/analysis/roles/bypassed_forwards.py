"""Models the training loop runs only through their own methods or parts, never their forward.

A prepared model is wrapped in DistributedDataParallel, which averages gradients across
processes only for a backward that follows its forward: `gen.sample(n)` or `vae.decoder(z)`
(`accelerator.unwrap_model(gen).sample(n)` once migrated) runs the plain module, so the
generator's gradients stay per process and every process trains its own copy, silently
[measured, torch 2.13, gloo: gradients differ across ranks]. A model the loop also calls
itself (`disc(x)`, `disc.forward(x)`), or hands to a helper that may call it, is fine.

A mixin of roles._Analyser, kept in its own module for size.
"""

from __future__ import annotations

import ast

from migrator.analysis.catalogue import patterns
from migrator.analysis.model.forwards import forwarded
from migrator.analysis.model.origins import Origin
from migrator.analysis.roles.facts import TrainingFacts
from migrator.analysis.roles.retained_graphs import NO_GRAD
from migrator.analysis.syntax.imports import dotted_name
from migrator.analysis.syntax.index import CallSite, ModuleIndex


class BypassedForwards:
    facts: TrainingFacts
    index: ModuleIndex

    # from loops.LoopAnalysis: _calls_reachable; from retained_graphs.RetainedGraphs:
    # _model_named; from objects.ObjectRoles: _bindings; from homes.ClassHomes: _home_of

    def _find_bypassed_forwards(self) -> None:
        """MIG900 naming the first call of each trained model that runs only through its own
        methods or parts in the training loops (module docstring)."""
        facts = self.facts
        run: set[str] = set()
        bypassed: dict[str, CallSite] = {}
        direct: dict[str, CallSite] = {}  # `vae.decoder(z)`: a part of a model run by itself
        calls = self._calls_reachable(c for loop in facts.training_loops for c in loop.calls)
        for site in sorted(calls, key=lambda s: (s.node.lineno, s.node.col_offset)):
            func = site.node.func
            model = self._model_named(site.scope, patterns.name_of(forwarded(func)))
            if model is not None:
                run.add(model)  # `gen(z)`, `gen.forward(z)`, `gen.train().forward(z)`
                continue
            part = self._part_of(site.scope, func)
            if part is not None and not _without_grad(site):
                direct.setdefault(part, site)  # `vae.decoder(z)`, `vae.decoder.forward(z)`
            for argument in [*site.node.args, *(k.value for k in site.node.keywords)]:
                handed = self._model_named(site.scope, patterns.name_of(argument))
                if handed is not None:
                    run.add(handed)  # `gradient_penalty(critic, x)`: may run it
            if isinstance(func, ast.Attribute):
                model = self._model_named(site.scope, patterns.root_name(func))
                if model is None:
                    continue
                if func.attr == "forward":
                    run.add(model)
                elif func.attr not in patterns.MODULE_API and func.attr != "__class__":
                    bypassed.setdefault(model, site)  # `gen.sample(n)`, `vae.decoder(z)`
        for part in self._parts_with_optimizers():
            if part in direct:
                self._part_finding(part, direct[part])
                return
        for model, site in bypassed.items():
            if model in run:
                continue
            self._finding(site.node, "MIG900",
                          f"`{model}` is trained in the loop but runs there only through "
                          f"`{self.index.source.text_of(site.node.func)}(...)` (line "
                          f"{site.node.lineno}), never its forward: DistributedDataParallel "
                          "averages a model's gradients only for its forward, so each process "
                          "would train its own copy; call the model itself (that code in its "
                          "`forward`) or migrate by hand")  # fmt: skip
            return

    def _parts_with_optimizers(self) -> set[str]:
        """Parts of trained models with an optimizer of their own (`SGD(vae.decoder.
        parameters())` beside `vae`'s): prepared with the whole model only (plan.py), so a
        forward of the part alone runs outside DistributedDataParallel and its step would
        apply this process's gradients only."""
        facts = self.facts
        owned = set()
        for name in facts.optimizers:
            home = self._home_of(name, facts.owner)
            for binding in self._bindings(Origin(home, name)):
                for node in ast.walk(binding.value) if binding.value is not None else ():
                    if (
                        isinstance(node, ast.Call)
                        and isinstance(node.func, ast.Attribute)
                        and (node.func.attr == "parameters")
                    ):
                        part = self._part_of(home, node.func.value, whole=True)
                        if part is not None:
                            owned.add(part)
        return owned

    def _part_of(self, scope, expr: ast.expr, whole: bool = False) -> str | None:
        """`vae.decoder` for `vae.decoder`, `vae.decoder.forward` or `vae.decoder.sample`
        (`whole`: the expression itself only), where `vae` is a trained model and the part is
        no model of its own name."""
        chain = dotted_name(expr)
        if chain is None:
            return None
        parts = chain.split(".")
        start = 2 if parts[0] == patterns.SELF else 1
        model = self._model_named(scope, ".".join(parts[:start]))
        if model is None or len(parts) < start + 1:
            return None
        if not whole and parts[-1] in patterns.MODULE_API and parts[-1] != "forward":
            return None  # `vae.decoder.parameters()`, `vae.decoder.train()`
        return ".".join([model, parts[start]])

    def _part_finding(self, part: str, site: CallSite) -> None:
        whole = part.rsplit(".", 1)[0]
        self._finding(site.node, "MIG900",
                      f"`{part}` has an optimizer of its own and the loop runs it by itself "
                      f"(`{self.index.source.text_of(site.node.func)}(...)`, line "
                      f"{site.node.lineno}); it is prepared as part of `{whole}` (a "
                      "DistributedDataParallel inside another would reduce it twice and "
                      "rename its checkpoint keys), so that forward passes outside the "
                      "wrapper and each process would train its own copy of it; run it "
                      f"through `{whole}`'s forward or migrate by hand")  # fmt: skip


def _without_grad(site: CallSite) -> bool:
    """Does the call run under `with torch.no_grad():` (a sample for a figure)?"""
    for statement in site.statement.chain():
        node = statement.node
        if isinstance(node, ast.With) and any(
            isinstance(item.context_expr, ast.Call)
            and (patterns.name_of(item.context_expr.func) or getattr(
                item.context_expr.func, "attr", "")).split(".")[-1] in NO_GRAD
            for item in node.items
        ):  # fmt: skip
            return True
    return False
