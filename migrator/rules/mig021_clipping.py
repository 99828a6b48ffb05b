"""MIG021 clipping: `torch.nn.utils.clip_grad_norm_/clip_grad_value_(...)` in any import form ->
`accelerator.clip_grad_norm_/clip_grad_value_(...)`, which unscales fp16 gradients first.

The accelerator's methods take what HF Accelerate's take (`parameters, max_norm, norm_type`;
`parameters, clip_value`): a call with more (`error_if_nonfinite=True`, `foreach=`) keeps
torch's function, with `accelerator.unscale_gradients()` before it when the Accelerator
scales fp16 gradients, and a note."""

from __future__ import annotations

import ast

from migrator.analysis.catalogue import patterns
from migrator.analysis.syntax.index import Line
from migrator.findings import Finding
from migrator.rules.base import Rule, RuleContext


class Clipping(Rule):
    code = "MIG021"
    name = "clipping"
    summary = "torch.nn.utils.clip_grad_norm_/value_ -> accelerator.clip_grad_norm_/value_"
    triggers = ("backward",)  # acts only in files with a training loop

    def apply(self, context: RuleContext) -> None:
        imports = context.facts.index.imports
        rewritten: set[str] = set()
        for scope in context.facts.training_scopes:
            for site in scope.calls:
                qualified = imports.qualify(site.node.func) or ""
                method = patterns.CLIP_FUNCTIONS.get(qualified)
                if method is None:
                    continue
                extra = _extra_arguments(site.node, ACCEPTED[method])
                if extra:
                    self._keep_torch(context, site, extra)
                    continue
                rewritten.add(qualified)
                replacement = context.accelerator_expr(method)
                context.edits.replace_with(site.node.func, replacement)
                context.need_accelerator_at(site.statement)
                if _clipped_scaled(context):
                    context.findings.append(Finding(code="MIG021", level="note",
                        node=site.node, message=(
                        "the original clipped the gradients its GradScaler had scaled (no "
                        "`scaler.unscale_(optimizer)` before the clip), so its threshold bound "
                        "the scaled norm; `accelerator.clip_grad_norm_` unscales them first, "
                        "and the same threshold now binds the true gradients, which clips far "
                        "less under fp16")))  # fmt: skip
        context.retire_imports_of(rewritten)

    @staticmethod
    def _keep_torch(context: RuleContext, site, extra: list[str]) -> None:
        """torch's clipping stays; fp16 gradients are unscaled before it."""
        scaled = any(k.name == "mixed_precision" for k in context.kwargs)
        statement = site.statement
        alone = isinstance(statement.node, Line) and len(statement.node.body) == 1
        if scaled and not (alone and statement.block.kind != "suite"):
            context.block_file(Finding(code="MIG021", node=site.node, message=(
                f"clipping with {', '.join(extra)}, which accelerator.clip_grad_norm_ does not "
                "take, needs the fp16 gradients unscaled first; call "
                "accelerator.unscale_gradients() before it, by hand")))  # fmt: skip
            return
        if scaled:
            code = f"{context.accelerator_expr('unscale_gradients')}()\n"
            context.edits.insert(statement.block, statement.index, context.statement(code), 20)
            context.need_accelerator_at(statement)
        unscaled = "; the fp16 gradients are unscaled before it" if scaled else ""
        message = (
            f"torch's clipping is kept: it is called with {', '.join(extra)}, which the "
            f"accelerator's does not take{unscaled}"
        )
        context.findings.append(
            Finding(code="MIG021", level="note", node=site.node, message=message)
        )


def _clipped_scaled(context: RuleContext) -> bool:
    """Does the original scale its losses with a GradScaler and never unscale before
    clipping (no `.unscale_(...)` anywhere)?"""
    imports = context.facts.index.imports
    calls = list(context.facts.index.calls())
    scaler = any((imports.qualify(s.node.func) or "") in patterns.GRAD_SCALERS for s in calls)
    return scaler and not any(s.method == "unscale_" for s in calls)


ACCEPTED = {
    "clip_grad_norm_": ("parameters", "max_norm", "norm_type"),
    "clip_grad_value_": ("parameters", "clip_value"),
}


def _extra_arguments(call: ast.Call, accepted: tuple[str, ...]) -> list[str]:
    """The arguments of `call` beyond the accelerator method's (`error_if_nonfinite=`)."""
    extra = [f"`{k.arg}=`" if k.arg else "`**kwargs`" for k in call.keywords
             if k.arg not in accepted]  # fmt: skip
    if any(isinstance(a, ast.Starred) for a in call.args) or len(call.args) > len(accepted):
        extra.append("more positional arguments")
    return extra
