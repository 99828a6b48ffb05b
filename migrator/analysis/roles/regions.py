"""Data regions: the code that holds loader batches (a training or eval loop, a helper called
with batch data), which the batch-placement and metric rules read. Which loops evaluate is
eval_loaders.py.

A mixin of roles._Analyser, kept in its own module for size: it reads `self.index`,
`self.imports`, `self.facts` and the loop analysis (`_loop_source`, `_callee_scope`).
"""

from __future__ import annotations

import ast

from migrator.analysis.model.dataflow import derive
from migrator.analysis.model.drivers import calls_reaching
from migrator.analysis.model.origins import (  # fmt: skip
    Origin,
    argument_for,
    class_methods,
    is_method,
)
from migrator.analysis.roles import explain
from migrator.analysis.roles.batch_feeds import TENSOR_FIELDS, opaque_loader, settle_feeds
from migrator.analysis.roles.facts import INLINE_LOADER, DataRegion, TrainingFacts
from migrator.analysis.syntax.index import ModuleIndex


class DataRegions:
    facts: TrainingFacts
    index: ModuleIndex
    imports: object

    def _field_batches(self, loaders: list[Origin]) -> bool:
        """MIG900 when a loop reads its batches' fields (`batch.text`, `batch.label`) from a
        loader this file receives rather than builds: a torchtext-style iterator, which
        prepare neither shards nor places on the device, while the rewrite would drop the
        batches' own `.cuda()`."""
        received = {o.name for o in loaders if not any(  # a parameter, `self.x = x`
            isinstance(b.value, ast.Call) for b in self._bindings(o))}  # fmt: skip
        for loop in self.facts.training_loops:
            source = self._loop_source(loop)
            if source is None or not received.intersection(
                self.facts.origin(source.scope, n).name for n in source.loaders
                if self.facts.origin(source.scope, n) is not None):  # fmt: skip
                continue
            names = source.batches if source.batches is not None else set(loop.target_names)
            for name in sorted(names):
                for use in loop.scope.uses.get(name, []):
                    if (
                        use.kind == "attr"
                        and use.call is None
                        and use.attr not in TENSOR_FIELDS
                        and loop.contains(use.loop)
                    ):
                        loader = ", ".join(f"`{n}`" for n in source.loaders)
                        self._finding(loop.node, "MIG900", (
                            f"{explain.loop_words(loop)} reads `{name}.{use.attr}` (line "
                            f"{use.statement.node.lineno}) from {loader}, which this file "
                            "receives rather than builds: batches read by field come from "
                            "torchtext-style iterators, which prepare neither shards nor places "
                            "on the device; migrate by hand"))  # fmt: skip
                        return True
        return False

    # -- data regions ------------------------------------------------------------------------
    def _find_regions(self, per_batch: set[int]) -> None:
        facts = self.facts
        inline: dict[int, ast.Call | None] = {}  # a loop region's loader built in place
        for loop in [*facts.training_loops, *facts.eval_loops]:
            source = self._loop_source(loop)
            if source is None:  # loader-less training: no batches to follow
                continue
            target = loop.node.target if not isinstance(loop.node, ast.While) else None
            seeds = set(loop.target_names) if source.batches is None else set(source.batches)
            if (
                source.batches is None
                and source.through_enumerate
                and (isinstance(target, ast.Tuple) and target.elts)
            ):
                first = target.elts[0]
                if isinstance(first, ast.Name):
                    seeds.discard(first.id)
            feeds = None
            if source.loaders:
                loader = facts.origin(source.scope, source.loaders[0])
                key = (id(source.scope), source.loaders[0])
                if loader is None and key in facts.loader_params:  # every call's loader
                    feeds = facts.loader_params[key]
                    loader = feeds[0]
            else:  # a DataLoader built in place (MIG006 names and prepares it)
                loader = Origin(source.scope, INLINE_LOADER)
            region = DataRegion(scope=loop.scope, loop=loop, loader=loader, seeds=seeds,
                                seed_statements=source.batch_statements,
                                feeds=feeds or [loader])  # fmt: skip
            inline[id(region)] = source.inline
            facts.regions.append(region)
        # Helpers called with batch data inside a region receive it as a parameter.
        queue = list(facts.regions)
        seen_helpers: set[tuple[int, str]] = set()
        while queue:
            region = queue.pop()
            region.names = derive(region)
            if region.loop is not None:
                region.opaque = opaque_loader(facts, region, inline.get(id(region)))
            for site in region.scope.calls:
                callee = self._callee_scope(site)
                if callee is None or not region.contains(site):
                    continue
                for param in callee.params:
                    argument = argument_for(site.node, callee, param)
                    if not isinstance(argument, ast.Name) or argument.id not in region.names:
                        continue
                    if (id(callee), param) in seen_helpers:
                        continue
                    seen_helpers.add((id(callee), param))
                    helper = DataRegion(scope=callee, loop=None, loader=region.loader,
                                        seeds={param})  # fmt: skip
                    facts.regions.append(helper)
                    queue.append(helper)
        settle_feeds(facts, self._callee_scope)
        for region in facts.regions:
            if region.scope not in facts.training_scopes:
                facts.training_scopes.append(region.scope)
        for loop in facts.training_loops:  # loader-less loops have no region
            if loop.scope not in facts.training_scopes:
                facts.training_scopes.append(loop.scope)
        if facts.owner not in facts.training_scopes:
            facts.training_scopes.insert(0, facts.owner)
        for home in facts.homes.values():  # where a class's other objects are made and prepared
            if home not in facts.training_scopes:
                facts.training_scopes.append(home)
        for scope in self.index.scopes:
            if id(scope) in per_batch and scope not in facts.training_scopes:
                facts.training_scopes.append(scope)
        looping = {id(loop.scope) for loop in [*facts.training_loops, *facts.eval_loops]}
        for scope in self.index.scopes:  # a Trainer's fit(): it drives the loops
            if scope not in facts.training_scopes and any(
                id(self._callee_scope(c)) in looping
                for c in scope.calls
                if self._callee_scope(c) is not None
            ):
                facts.training_scopes.append(scope)
        callers = list(calls_reaching(self.index, facts.owner))
        if any(caller.loop is not None for caller in callers):  # a sweep over folds, widths
            for caller in callers:  # the drivers, whose device reaches the owner
                if caller.scope.kind == "function" and caller.scope not in facts.training_scopes:
                    facts.training_scopes.append(caller.scope)
        if is_method(facts.owner):  # a Trainer's `_save_checkpoint()`, called from `train()`
            methods = {id(m) for m in class_methods(facts.owner)}
            for scope in list(facts.training_scopes):
                for call in scope.calls:
                    callee = self._callee_scope(call)
                    if (
                        callee is not None
                        and id(callee) in methods
                        and callee not in facts.training_scopes
                    ):
                        facts.training_scopes.append(callee)
