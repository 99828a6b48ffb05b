"""MIG004 batch placement: in loops over prepared loaders (and helpers they hand batches to),
`.to(device)`/`.cuda()` on loader data is removed — the prepared loader already placed it.
A copy to the host (`.to("cpu")`, `.to(torch.device("cpu"))`; `.cpu()` is no placement) is
never removed: the batch is on the accelerator's device now; and an item the original kept
on the host (never moved, read beside `.cpu()` values) gets `.cpu()` there (SPEC §3b.5).
Statements left doing nothing (`x = x`, `batch = {k: v for k, v in batch.items()}`) go too.
Tensors that do not come from a prepared loader keep their placement, and so does a region
some of whose batches may not be placed (batch_feeds.py: a helper also called with other data,
a collate function of the script's own): MIG002 points it at `accelerator.device`."""

from __future__ import annotations

import ast

from migrator.analysis.catalogue import patterns
from migrator.analysis.model.chains import chain_text
from migrator.analysis.model.dataflow import data_root
from migrator.analysis.model.host_batches import host_reads
from migrator.analysis.model.origins import calls_of
from migrator.analysis.roles.facts import DataRegion
from migrator.branches import quiet
from migrator.findings import Finding
from migrator.rules.base import Rule, RuleContext
from migrator.rules.cpu_request import places_off_cpu
from migrator.rules.host_inputs import place_host_values
from migrator.rules.placement_calls import strip_placement

COMPREHENSIONS = (ast.DictComp, ast.ListComp, ast.GeneratorExp, ast.SetComp)


class BatchPlacement(Rule):
    code = "MIG004"
    name = "batch-placement"
    summary = "remove .to(device)/.cuda() on batches that come from a prepared DataLoader"
    triggers = ("backward",)  # acts only in files with a training loop

    def apply(self, context: RuleContext) -> None:
        facts = context.facts
        host_copies = places_off_cpu(context)  # else `.to("cpu")` is the script's placement
        for region in facts.regions:
            if region.loader is None or not context.prepared(region.loader.name):
                continue
            if (
                region.mixed
                or region.opaque
                or not all(context.prepared(loader.name) for loader in region.feeds)
            ):  # batches the loader may not place: `.to(...)` stays (on accelerator.device)
                continue
            plain = _called_with_plain_loaders(context, region)
            if plain is not None:
                context.block_file(Finding(code="MIG900", node=plain.node, message=(
                    f"`{region.scope.name}()` evaluates `{region.loader.name}`, which "
                    f"`{region.loader.scope.name}()` prepares from what its callers pass, but "
                    f"the call at line {plain.node.lineno} hands it the plain loader: every "
                    "process would evaluate (and gather) the whole set there; prepare the "
                    "loader where it is made, by hand"), plain_evaluation_helps=True))  # fmt: skip
                return
            devices = facts.device_names(region.scope)
            comprehension_calls = self._comprehension_calls(region)
            for site in region.scope.calls:
                if not region.contains(site) or site.method not in ("to", "cuda"):
                    continue
                if context.edits.has_replacement(site.node):
                    continue
                receiver = site.receiver
                from_data = data_root(receiver, region.names) is not None
                if not from_data and id(site.node) not in comprehension_calls:
                    continue
                if patterns.moves_off_device(site.node, site.small, facts.index.imports) or (
                    host_copies and patterns.moves_to_cpu(site.node, facts.index.imports)
                ):
                    continue  # a host copy (`y.to("cpu").numpy()`, a figure's image): kept
                if strip_placement(site.node, devices, facts.index.imports, context.edits):
                    context.edits.clean_up(site.small)
                    drop_guards_if_emptied(context, site.statement)
            for loop in region.scope.loops:
                # `for k in batch: batch[k] = batch[k].to(device)` disappears with its body.
                inside = region.loop is None or region.loop.contains(loop.parent)
                if inside and loop is not region.loop and data_root(loop.iter, region.names):
                    context.edits.drop_if_emptied.add(id(loop.node))
        self._host_copies(context)
        if not host_copies:  # the original computed on the CPU alone
            place_host_values(context)

    def _host_copies(self, context: RuleContext) -> None:
        """Items the original kept on the host and read there (`all_labels.append(y)` beside
        `logits.cpu()`) get `.cpu()`: a prepared loader places every item (host_batches.py)."""
        facts = context.facts

        def prepared_loader(scope, name: str) -> bool:
            return context.prepared_role(scope, name) == "loader"

        for node in host_reads(facts.index, prepared_loader, facts.device_names):
            if not context.edits.has_replacement(node):
                context.edits.replace(node, lambda text, _renderer: f"{text}.cpu()")

    def _comprehension_calls(self, region: DataRegion) -> set[int]:
        """ids of placement calls on the variables of comprehensions over loader data."""
        found: set[int] = set()
        names = region.names
        seen: set[int] = set()
        for site in region.scope.calls:
            small = site.small
            if small is None or id(small) in seen or not region.contains(site):
                continue
            seen.add(id(small))
            for node in ast.walk(small):
                if not isinstance(node, COMPREHENSIONS):
                    continue
                generator = node.generators[0]
                if data_root(generator.iter, names) is None:
                    continue
                targets = set(_names(generator.target))
                parts = (node.key, node.value) if isinstance(node, ast.DictComp) else (node.elt,)
                for part in parts:
                    for call in ast.walk(part):
                        if (
                            isinstance(call, ast.Call)
                            and isinstance(call.func, ast.Attribute)
                            and call.func.attr in ("to", "cuda")
                            and data_root(call.func.value, targets) is not None
                        ):
                            found.add(id(call))
        return found


def _names(target: ast.expr) -> list[str]:
    if isinstance(target, ast.Name):
        return [target.id]
    if isinstance(target, (ast.Tuple, ast.List)):
        return [n for element in target.elts for n in _names(element)]
    if isinstance(target, ast.Starred):
        return _names(target.value)
    return []


__all__ = ["BatchPlacement", "drop_guards_if_emptied", "patterns"]


def _called_with_plain_loaders(context: RuleContext, region: DataRegion):
    """The call that hands the region its loader plain, where the loader reaches it through a
    function that prepares what its callers pass (`train(self, train_loader, val_loader)`)
    and a call from outside that function passes the region the plain loader too
    (`trainer.evaluate(val_loader)` in `main()` after `trainer.train(...)`); else None."""
    loader, scope = region.loader, region.scope
    if loader is None or loader.name not in loader.scope.params:
        return None  # made where it is prepared: the plain object has no other name
    prepares = loader.scope
    if prepares is scope or prepares not in (context.facts.owner, context.facts.meeting):
        return None
    outside = [s for s in calls_of(context.facts.index, scope) if not s.scope.within(prepares)]
    if region.loop is None:  # a helper handed batches: only a call handing it a loader counts
        loaders = {loader.name, *context.facts.loaders}
        outside = [s for s in outside if any(chain_text(a) in loaders for a in _arguments(s))]
    return outside[0] if outside else None


def _arguments(site) -> list[ast.expr]:
    return [*site.node.args, *(k.value for k in site.node.keywords)]


def drop_guards_if_emptied(context: RuleContext, statement) -> None:
    """The statements around a removed statement (a stripped placement, accumulation's
    division) that exist only for it go with it when it leaves them empty: `if is_cuda:` /
    `if steps > 1:` (a quiet test, no `else`) and `with torch.no_grad():`, innermost first,
    up to the loop."""
    imports = context.facts.index.imports
    parent = statement.block.parent
    while parent is not None:
        node = parent.node
        if isinstance(node, ast.If):
            if node.orelse or not quiet(node.test, imports):
                return
        elif not (isinstance(node, ast.With) and len(node.items) == 1
                  and patterns.last_part(imports.qualify(_called(node.items[0].context_expr)) or "")
                  == "no_grad" and node.items[0].optional_vars is None):  # fmt: skip
            return
        context.edits.drop_if_emptied.add(id(node))
        parent = parent.block.parent


def _called(expr: ast.expr) -> ast.expr | None:
    return expr.func if isinstance(expr, ast.Call) else None
