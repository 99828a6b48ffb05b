"""MIG901 DataParallel: single-process multi-GPU that `prepare` would wrap again in DDP.
Reported, never rewritten; the file is left as it is."""

from __future__ import annotations

from migrator.analysis import patterns
from migrator.findings import Finding
from migrator.rules.base import Rule, RuleContext


def data_parallel_calls(context: RuleContext):
    imports = context.facts.index.imports
    found = []
    for site in context.facts.index.calls():
        qualified = imports.qualify(site.node.func) or ""
        if qualified in patterns.DATA_PARALLEL or (
            qualified == "DataParallel" and not imports.imported("DataParallel")
        ):
            found.append(site)
    return found


class DataParallel(Rule):
    code = "MIG901"
    name = "data-parallel"
    summary = "report nn.DataParallel (finding: use one process per device instead)"
    # `DataParallel` as named or imported, never inside `DistributedDataParallel` (MIG010's).
    triggers = (".DataParallel", " DataParallel", "(DataParallel", "=DataParallel",
                ",DataParallel", "\nDataParallel")  # fmt: skip
    detector = True

    def apply(self, context: RuleContext) -> None:
        for site in data_parallel_calls(context):
            context.findings.append(Finding(
                code=self.code,
                message="nn.DataParallel: remove it and run one process per device "
                "(`migrate launch --nproc N`); accelerator.prepare wraps the model in DDP",
                node=site.node,
            ))  # fmt: skip
