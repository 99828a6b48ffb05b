"""MIG010 on DistributedSampler: the sampler (and its single-process `else:` branch) goes, the
loader it fed gets `shuffle=` instead of `sampler=`, and a BatchSampler over it becomes the
loader's `batch_size=`, `shuffle=` and `drop_last=`. A part of mig010_native_ddp.py's migration,
kept in its own module for size."""

from __future__ import annotations

import ast

from migrator.analysis.distributed.facts import Sampler
from migrator.analysis.syntax.views import call_args
from migrator.arglists import call_items
from migrator.findings import Finding


class SamplerMigration:
    edits: object
    source: object
    context: object

    def _epoch_note(self, sampler: Sampler) -> None:
        """A shuffling sampler never told the epoch (no `set_epoch` anywhere) drew one order
        every epoch; the prepared loader draws a new one each epoch: a note says so."""
        shuffle = sampler.shuffle
        if isinstance(shuffle, ast.Constant) and shuffle.value is False:
            return
        if any(site.method == "set_epoch" for site in self.context.facts.index.calls()):
            return
        self.context.findings.append(Finding(code="MIG010", level="note", node=sampler.site.node,
                                             message=(
            "the original's DistributedSampler is never told the epoch (`set_epoch`), so it "
            "shuffled the data in one order every epoch; the prepared loader shuffles anew "
            "each epoch, as a single-process `shuffle=True` loader does")))  # fmt: skip

    def _remove(self, small, statement) -> None:
        raise NotImplementedError

    def _drop_sampler(self, sampler: Sampler) -> None:
        if sampler.binding is not None:
            self._remove(sampler.binding.small, sampler.binding.statement)
        for returned in sampler.returned:  # `return loader, sampler`: its callers get None
            self.edits.replace_with(returned, "None")
        for fallback in sampler.fallbacks:  # `else: sampler = None` (or RandomSampler(ds))
            self._remove(fallback.small, fallback.statement)
        source = self.source
        shuffle = source.text_of(sampler.shuffle) if sampler.shuffle is not None else "True"
        for batches in sampler.batch_loaders:  # `batch_sampler=BatchSampler(sampler, ...)`
            self._remove(batches.binding.small, batches.binding.statement)
            self.edits.replace(
                batches.arg.node,
                lambda _t, r, b=batches: (
                    f"batch_size={r.text_of(b.batch_size, parens=False)}, shuffle={shuffle}, "
                    f"drop_last={r.text_of(b.drop_last, parens=False)}"
                ),
                drops=[batches.arg.value],
            )
        for loader, arg in sampler.loader_args:
            args = call_args(loader)
            existing = next((a for a in args if a.keyword == "shuffle"), None)
            if existing is None:  # `sampler=...` becomes `shuffle=...`
                keyword = arg.node
                equal = source.text[source.start(keyword) + len(arg.keyword) :
                                    source.own_span(arg.value)[0]]  # fmt: skip
                self.edits.replace(keyword, lambda _t, _r, e=equal: f"shuffle{e}{shuffle}",
                                   drops=[arg.value])  # fmt: skip
                continue
            self.edits.replace_with(existing.value, shuffle)
            position = next(i for i, a in enumerate(args) if a.node is arg.node)
            self.edits.rewrite(loader, lambda _t, r, c=loader, p=position: call_items(
                r, c).without({p}).render(), drops=[arg.value])  # fmt: skip
