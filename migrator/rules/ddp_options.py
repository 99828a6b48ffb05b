"""DistributedDataParallel options the wrapper carried (`find_unused_parameters=True`,
`broadcast_buffers=False`, `static_graph=True`, ...) move to the Accelerator, which passes them
to the DDP wrapper `prepare` makes: `Accelerator(kwargs_handlers=[DistributedDataParallelKwargs(
find_unused_parameters=True)])`, as HF Accelerate spells it. Every wrapper of the file must
ask for the same options, each value a literal or a name the Accelerator can read where it
is made; anything else stays a MIG909 for a human."""

from __future__ import annotations

import ast

from migrator.analysis.distributed.facts import Wrap
from migrator.analysis.syntax.views import call_args
from migrator.findings import Finding
from migrator.rules.base import RuleContext

HANDLER = "DistributedDataParallelKwargs"
# the fields of DistributedDataParallelKwargs (runtime.config, accelerate.utils.dataclasses)
HANDLER_FIELDS = ("dim", "broadcast_buffers", "bucket_cap_mb", "find_unused_parameters",
                  "check_reduction", "gradient_as_bucket_view", "static_graph")  # fmt: skip
# DistributedDataParallel's defaults: an option spelled with its default asks for nothing
DEFAULTS = {"dim": "0", "broadcast_buffers": "True", "find_unused_parameters": "False",
            "check_reduction": "False", "static_graph": "False"}  # fmt: skip


def carry_ddp_options(context: RuleContext, wraps: list[Wrap]) -> list[Wrap]:
    """Add the handler for the wrappers' options when it can be; the wrappers whose options
    are left for a human (all of them when the handler cannot be made)."""
    asking = [wrap for wrap in wraps if wrap.dropped_options]
    if not asking:
        return []
    options: dict[str, tuple[str, tuple[str, ...]]] = {}
    for wrap in asking:
        own = _options(context, wrap)
        if own is None or any(options.get(k, v)[0] != v[0] for k, v in own.items()):
            return asking
        if options and set(own) != set(options):
            return asking
        options.update(own)
    options = {k: v for k, v in options.items() if DEFAULTS.get(k) != v[0]}
    if not options:  # `find_unused_parameters=False`: what prepare's wrapper does anyway
        return []
    arguments = ", ".join(f"{name}={code}" for name, (code, _) in options.items())
    depends = [name for _code, names in options.values() for name in names]
    context.add_kwarg("kwargs_handlers", f"[{HANDLER}({arguments})]", depends)
    if HANDLER not in context.accelerator_imports:
        context.accelerator_imports.append(HANDLER)
    for wrap in asking:
        context.findings.append(Finding(code="MIG909", level="note", node=wrap.site.node, message=(
            f"DistributedDataParallel option(s) {arguments} carried to the Accelerator: "
            f"kwargs_handlers=[{HANDLER}({arguments})] hands them to the DDP wrapper prepare "
            "makes")))  # fmt: skip
    return []


def _options(context: RuleContext, wrap: Wrap) -> dict[str, tuple[str, tuple[str, ...]]] | None:
    """{option: (code, names it reads)} for the wrapper's dropped options; None when one is
    no handler field, a `**kwargs`, or a value the Accelerator cannot read where it is made."""
    if any(option.startswith("**") for option in wrap.dropped_options):
        return None
    found = {}
    for argument in call_args(wrap.site.node):
        name = argument.keyword
        if name is None or name not in wrap.dropped_options:
            continue
        if name not in HANDLER_FIELDS or isinstance(argument.value, ast.Starred):
            return None
        value = context.owner_expression(wrap.site.scope, argument.value)
        if value is None:
            return None
        found[name] = value
    return found
