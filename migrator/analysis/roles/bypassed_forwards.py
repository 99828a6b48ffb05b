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
from migrator.analysis.roles.facts import TrainingFacts
from migrator.analysis.syntax.index import CallSite, ModuleIndex


class BypassedForwards:
    facts: TrainingFacts
    index: ModuleIndex

    # from loops.LoopAnalysis: _calls_reachable; from retained_graphs.RetainedGraphs:
    # _model_named

    def _find_bypassed_forwards(self) -> None:
        """MIG900 naming the first call of each trained model that runs only through its own
        methods or parts in the training loops (module docstring)."""
        facts = self.facts
        run: set[str] = set()
        bypassed: dict[str, CallSite] = {}
        calls = self._calls_reachable(c for loop in facts.training_loops for c in loop.calls)
        for site in sorted(calls, key=lambda s: (s.node.lineno, s.node.col_offset)):
            func = site.node.func
            model = self._model_named(site.scope, patterns.name_of(forwarded(func)))
            if model is not None:
                run.add(model)  # `gen(z)`, `gen.forward(z)`, `gen.train().forward(z)`
                continue
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
