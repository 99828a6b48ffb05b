"""Reading native DDP's DistributedSampler: named or inline in the loader call (`sampler=
DistributedSampler(ds) if ddp else None`), with the single-process fallback of its `if`, and
every place it is used (the loader it feeds, `set_epoch`, a factory returning it). A mixin of
objects.ObjectReader, kept in its own module for size."""

from __future__ import annotations

import ast

from migrator.analysis.catalogue import patterns
from migrator.analysis.distributed.facts import (
    FALLBACK_SAMPLERS,
    DistributedFacts,
    Sampler,
    contains,
    keyword_value,
    whole_statement,
)
from migrator.analysis.distributed.sampler_hand_offs import handed_to_set_epoch
from migrator.analysis.distributed.sampler_shapes import (
    batch_loader,
    constant,
    drop_last_problem,
    logging_print,
    option_problem,
)
from migrator.analysis.syntax.index import CallSite, Line, ModuleIndex, Scope
from migrator.analysis.syntax.views import call_args, name_value


class SamplerReader:
    index: ModuleIndex
    imports: object
    facts: DistributedFacts
    sites: list

    def _block(self, node, code: str, message: str, level: str = "warning") -> None:
        raise NotImplementedError

    def _sampler(self, site: CallSite) -> None:
        shuffle = keyword_value(site.node, "shuffle", 3)
        sampler = Sampler(site=site, binding=None, shuffle=shuffle)
        problem = option_problem(site.node, site.scope, self.facts, self.imports,
                                 self.sites, self.index.functions)  # fmt: skip
        if problem is not None:
            self._block(site.node, "MIG907", f"DistributedSampler {problem}; migrate by hand")
            return
        loader = self._inline_loader_arg(site, sampler)
        if loader is not None:
            sampler.loader_args.append(loader)
            self._accept(sampler)
            return
        small = site.small
        scope = site.scope
        reason = "is not assigned to one name"
        if (
            isinstance(small, ast.Assign)
            and _sampler_or_fallback(small.value, site.node, lambda v: self._fallback(v, sampler))
            and len(small.targets) == 1
            and isinstance(small.targets[0], ast.Name)
        ):
            name = small.targets[0].id
            bindings = scope.assigns(name)
            own = next((b for b in bindings if b.small is small), None)
            others = [b for b in bindings if b is not own]
            if own is None or (others and not self._single_process_fallbacks(sampler, own, others)):
                lines = ", ".join(str((b.small or b.statement.node).lineno) for b in others)
                reason = (f"`{name}` is also bound at line(s) {lines}, not as the `else:` "
                          "None/RandomSampler/SequentialSampler of the same `if`")  # fmt: skip
            else:
                reason = self._sampler_uses(sampler, scope, name)
                if reason is None:
                    sampler.binding = own
                    sampler.fallbacks = others
                    self._accept(sampler)
                    return
        self._block(site.node, "MIG907", f"DistributedSampler {reason}: only a DataLoader's "
                    "`sampler=` and `set_epoch` are migrated; migrate by hand")  # fmt: skip

    def _accept(self, sampler: Sampler) -> None:
        problem = drop_last_problem(sampler)
        if problem is not None:
            self._block(sampler.site.node, "MIG907", f"DistributedSampler {problem}; migrate "
                        "by hand")  # fmt: skip
            return
        self.facts.samplers.append(sampler)

    def _single_process_fallbacks(self, sampler: Sampler, own, others) -> bool:
        """`if args.distributed: sampler = DistributedSampler(ds)` whose `else:` binds the same
        name to None, `RandomSampler(ds)` or `SequentialSampler(ds)` (matching the
        DistributedSampler's shuffle), or the same with the branches the other way round
        (`if not distributed: sampler = None` / `else: sampler = DistributedSampler(ds)`):
        the whole choice becomes the loader's own shuffle."""
        parent = own.statement.block.parent
        field = own.statement.block.field
        if parent is None or not isinstance(parent.node, ast.If):
            return False
        if field not in ("body", "orelse"):
            return False
        fallback_field = "orelse" if field == "body" else "body"
        for binding in others:
            block = binding.statement.block
            if block.parent is not parent or block.field != fallback_field or binding.kind != (
                "assign"
            ) or binding.unpacked:  # fmt: skip
                return False
            if not self._fallback(binding.value, sampler):
                return False
        return True

    def _fallback(self, value: ast.expr | None, sampler: Sampler) -> bool:
        """None, or the single-process sampler of the DistributedSampler's shuffle."""
        if name_value(value) == "None":
            return True
        if not isinstance(value, ast.Call):
            return False
        shuffle = True if sampler.shuffle is None else constant(sampler.shuffle)
        kind = FALLBACK_SAMPLERS.get(self.imports.qualify(value.func) or "")
        return kind is not None and shuffle is kind

    def _inline_loader_arg(self, site: CallSite, sampler: Sampler):
        """`DataLoader(ds, sampler=DistributedSampler(ds))`, or `sampler=DistributedSampler(
        ds) if ddp else None` (the fallback of the single-process run, either way round)."""
        for other, _ in self.sites:
            if other.scope is site.scope and patterns.is_loader_call(other.node, self.imports):
                for arg in call_args(other.node):
                    if arg.keyword != "sampler":
                        continue
                    if arg.value is site.node or (
                        isinstance(arg.value, ast.IfExp)
                        and _sampler_or_fallback(
                            arg.value, site.node, lambda v: self._fallback(v, sampler)
                        )
                    ):
                        return other.node, arg
        return None

    def _sampler_uses(self, sampler: Sampler, scope: Scope, name: str) -> str | None:
        """None when every use of the sampler is one MIG010 rewrites, else what is not."""
        for use in scope.uses.get(name, []):
            call = use.call
            if (
                use.kind == "arg"
                and call is not None
                and patterns.is_loader_call(call, self.imports)
            ):
                arg = next((a for a in call_args(call) if a.value is use.node), None)
                if arg is not None and arg.keyword == "sampler":
                    sampler.loader_args.append((call, arg))
                    continue
            if use.kind == "attr" and use.attr == "set_epoch" and call is not None:
                site = next((s for s, _ in self.sites if s.node is call), None)
                if site is not None and whole_statement(site):
                    self.facts.removed_calls.append(site)
                    continue
            if self._in_loader_shuffle(use, name) or _guards_set_epoch(use, name):
                continue
            if self._named_shuffle(use, name, scope):
                continue
            if self._returned_to_set_epoch(use, scope, sampler):
                continue
            if handed_to_set_epoch(self, use, scope, name, sampler):
                continue
            shown = logging_print(use, self.sites)  # `print("Sampler = %s" % str(sampler))`
            if shown is not None:
                self.facts.removed_calls.append(shown)
                continue
            batches = batch_loader(use, scope, self.imports, self.sites)
            if isinstance(batches, str):
                return f"`{name}` {batches}"
            if batches is not None:
                sampler.batch_loaders.append(batches)
                continue
            return f"`{name}` is used at line {use.node.lineno}"
        for child in scope.children:
            if not child.is_local(name) and child.uses.get(name):
                return f"`{name}` is used inside `{child.name}`"
        return None

    def _returned_to_set_epoch(self, use, scope: Scope, sampler: Sampler) -> bool:
        """`return train_loader, train_sampler` of a loader factory whose every caller
        unpacks the sampler into a name it only `set_epoch`s (`loader, sampler = get_data()`;
        `sampler.set_epoch(epoch)`, maybe under `if sampler is not None:`): the factory
        returns None there and the calls go."""
        small = use.statement.node.body[0] if isinstance(use.statement.node, Line) else None
        value = small.value if isinstance(small, ast.Return) else None
        if not isinstance(value, ast.Tuple) or scope.kind != "function":
            return False
        position = next((i for i, e in enumerate(value.elts) if e is use.node), None)
        callers = [site for site, _ in self.sites
                   if self.index.functions.get(name_value(site.node.func) or "") is scope]  # fmt: skip
        if position is None or not callers:
            return False
        removed = []
        for site in callers:
            target = _unpacked_into(site, len(value.elts), position)
            if target is None or len(site.scope.assigns(target)) != 1:
                return False
            for other in site.scope.uses.get(target, []):
                if _guards_set_epoch(other, target):
                    continue  # `if sampler is not None:` around its `set_epoch`
                call = other.call if other.kind == "attr" and other.attr == "set_epoch" else None
                found = next((s for s, _ in self.sites if s.node is call), None)
                if found is None or not whole_statement(found):
                    return False
                removed.append(found)
            if any(not c.is_local(target) and c.uses.get(target) for c in site.scope.children):
                return False
        self.facts.removed_calls.extend(removed)
        sampler.returned.append(use.node)
        return True

    def _named_shuffle(self, use, name: str, scope) -> bool:
        """`shuffle = sampler is None` (a name bound once here, read only as `shuffle=` of
        loaders the sampler feeds): the inline idiom through a name. The binding goes with the
        sampler, and the loaders' `shuffle=` gets the sampler's (rewritten with it)."""
        small = use.statement.node.body[0] if isinstance(use.statement.node, Line) and len(
            use.statement.node.body) == 1 else None  # fmt: skip
        if not isinstance(small, ast.Assign) or len(small.targets) != 1:
            return False
        target = small.targets[0]
        if not isinstance(target, ast.Name) or not contains(small.value, use.node):
            return False
        if len(scope.assigns(target.id)) != 1 or any(
            n.id == name for n in ast.walk(small.value) if isinstance(n, ast.Name)
            and n is not use.node
        ):  # fmt: skip
            return False
        reads = scope.uses.get(target.id, [])
        if not reads or not all(self._in_named_loader_shuffle(read, name) for read in reads):
            return False
        self.facts.removed_smalls.append((small, use.statement))
        return True

    def _in_named_loader_shuffle(self, read, name: str) -> bool:
        """`DataLoader(..., shuffle=<read>, sampler=<name>)`."""
        call = read.call if read.kind == "arg" else None
        if call is None or not patterns.is_loader_call(call, self.imports):
            return False
        shuffle = next((a for a in call_args(call) if a.keyword == "shuffle"), None)
        return (shuffle is not None and shuffle.value is read.node
                and name_value(keyword_value(call, "sampler")) == name)  # fmt: skip

    def _in_loader_shuffle(self, use, name: str) -> bool:
        """`shuffle=(sampler is None)` in the loader the sampler feeds (rewritten with it)."""
        for site, _ in self.sites:
            if site.statement is not use.statement or not patterns.is_loader_call(
                site.node, self.imports
            ):
                continue
            shuffle = next((a for a in call_args(site.node) if a.keyword == "shuffle"), None)
            feeds = keyword_value(site.node, "sampler")
            if shuffle is not None and name_value(feeds) == name:
                return contains(shuffle.value, use.node)
        return False


def _sampler_or_fallback(value: ast.expr, sampler: ast.Call, fallback) -> bool:
    """`DistributedSampler(...)`, or `DistributedSampler(...) if distributed else None` (or
    else the single-process sampler of its shuffle, `fallback`, either way round): without the
    sampler the loader's own `shuffle=` decides, which is what the rewrite restores."""
    if value is sampler:
        return True
    if not isinstance(value, ast.IfExp):
        return False
    branches = (value.body, value.orelse)
    return any(b is sampler for b in branches) and any(
        b is not sampler and fallback(b) for b in branches
    )


def _unpacked_into(site: CallSite, size: int, position: int) -> str | None:
    """The name `a, b, c = f(...)` binds at `position` of `size` targets, if the call is so."""
    small = site.small
    if not isinstance(small, ast.Assign) or small.value is not site.node or len(small.targets) != 1:
        return None
    target = small.targets[0]
    if not isinstance(target, ast.Tuple) or len(target.elts) != size:
        return None
    return (
        name_value(target.elts[position]) if isinstance(target.elts[position], ast.Name) else None
    )


def _guards_set_epoch(use, name: str) -> bool:
    """`if sampler is not None: sampler.set_epoch(epoch)`: the test goes with its only body."""
    node = use.statement.node
    if not isinstance(node, ast.If) or node.orelse or not contains(node.test, use.node):
        return False
    return all(
        isinstance(small, ast.Expr) and isinstance(small.value, ast.Call)
        and isinstance(small.value.func, ast.Attribute)
        and small.value.func.attr == "set_epoch"
        and isinstance(small.value.func.value, ast.Name)
        and small.value.func.value.id == name
        for small in node.body
    )  # fmt: skip
