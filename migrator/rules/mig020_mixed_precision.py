"""MIG020 mixed precision: autocast contexts (`torch.autocast`, `torch.cuda.amp.autocast`,
`torch.amp.autocast("cuda", ...)`) become `accelerator.autocast()`; the GradScaler goes, with
its dance: `scaler.scale(loss).backward()` -> `accelerator.backward(loss)`,
`scaler.step(opt)` -> `opt.step()`, `scaler.update()` / `scaler.unscale_(opt)` removed.
The Accelerator gets `mixed_precision=` from the autocast dtype (fp16 / bf16).

CUDA autocast and GradScaler do nothing on a machine without CUDA, so the original trains in
fp32 there; the migrated script keeps that: `"fp16" if torch.cuda.is_available() else "no"`.
A dynamic `enabled=` becomes part of the same condition.

A scaler the file does not make as one `GradScaler(...)` call (a helper's parameter, the
`GradScaler() if amp else None` of torchvision's references) cannot go: then the script keeps
its own autocast and GradScaler, run on each process as under torchrun DDP, the backward goes
through the accelerator and the Accelerator gets no `mixed_precision=` (a note).
"""

from __future__ import annotations

import ast

from migrator.analysis.catalogue import patterns
from migrator.analysis.model.origins import (
    class_methods,
    handed_to_parameter,
    is_method,
)
from migrator.analysis.roles import explain
from migrator.analysis.syntax.index import Line, Scope
from migrator.analysis.syntax.views import call_args, name_value
from migrator.findings import Finding
from migrator.rules.base import Rule, RuleContext
from migrator.rules.own_amp import OwnAmp

CLIPS = {"clip_grad_norm_", "clip_grad_value_"}
SCALER_METHODS = {"scale", "step", "update", "unscale_", "state_dict", "load_state_dict"}


class MixedPrecision(OwnAmp, Rule):
    code = "MIG020"
    name = "mixed-precision"
    summary = (
        "autocast/GradScaler -> accelerator.autocast() and mixed_precision= on the Accelerator"
    )
    triggers = ("backward",)  # acts only in files with a training loop

    def apply(self, context: RuleContext) -> None:
        self.rewritten: set[str] = set()  # qualified names of the calls rewritten away
        self._migrate(context)
        context.retire_imports_of(self.rewritten)

    def _migrate(self, context: RuleContext) -> None:
        facts = context.facts
        imports = facts.index.imports
        precisions: set[str] = set()
        cuda_only = False
        conditions: list[str] = []
        depends: list[str] = []
        scopes = facts.training_scopes
        autocasts: list[ast.Call] = []
        if (
            self._unmade_scaler(context, scopes)
            or self._kept_scaler(context, scopes)
            or self._own_autocast(context, scopes)
        ):
            return
        for scope in scopes:
            for site in scope.calls:
                found = patterns.autocast_precision(site.node, imports)
                if found is None:
                    continue
                if found[0] is None:
                    dtype = patterns.keyword(site.node, "dtype")
                    message = (explain.runtime_dtype(dtype.value) if dtype is not None else
                               "the autocast dtype is not a literal torch.float16/bfloat16; "
                               "set mixed_precision= on the Accelerator by hand")  # fmt: skip
                    context.block_file(Finding(code="MIG900", node=site.node, message=message))
                    return
                precision, on_cuda = found
                if not self._enabled(context, scope, site.node, conditions, depends):
                    continue
                precisions.add(precision)
                cuda_only = cuda_only or on_cuda
                self.rewritten.add(imports.qualify(site.node.func) or "")
                context.edits.replace_with(site.node, f"{context.accelerator_expr('autocast')}()")
                context.need_accelerator_at(site.statement)
                autocasts.append(site.node)
        scaled = self._scalers(context, scopes, conditions, depends)
        if scaled is None:
            return
        if scaled:
            precisions.add("fp16") if not precisions else None
            cuda_only = True
        if not precisions:
            return
        if len(precisions) > 1:
            context.block_file(Finding(code="MIG900", message="autocast with both float16 and "
                                       "bfloat16; choose one mixed precision by hand"))  # fmt: skip
            return
        precision = precisions.pop()
        if precision == "fp16" and not scaled:
            # fp16 with no GradScaler: Accelerate's fp16 would scale the loss (and skip the
            # steps whose scaled gradients overflow): the original's autocast stays as it is
            for node in autocasts:
                context.edits.cancel(node)
            context.findings.append(Finding(code="MIG020", level="note", node=autocasts[0],
                message="the original trains under float16 autocast with no GradScaler: its "
                "autocast stays as it is, on every process, and the Accelerator gets no "
                "mixed_precision= (Accelerate's fp16 would add loss scaling, which skips the "
                "steps whose gradients overflow: another training)"))  # fmt: skip
            return
        if cuda_only:
            conditions.append(f"{context.torch_name()}.cuda.is_available()")
        value = f'"{precision}"'
        if conditions:
            value = f'"{precision}" if {" and ".join(dict.fromkeys(conditions))} else "no"'
        context.add_kwarg("mixed_precision", value, depends)

    # -- enabled= ----------------------------------------------------------------------------
    def _enabled(self, context, scope: Scope, call: ast.Call, conditions, depends) -> bool:
        """Record a dynamic `enabled=`; False when it is literally False (AMP off)."""
        argument = patterns.keyword(call, "enabled")
        if argument is None:
            return True
        value = argument.value
        if name_value(value) in ("True", "False"):
            return name_value(value) == "True"
        if patterns.is_cuda_available_call(value, context.facts.index.imports):
            conditions.append(context.source.text_of(value))
            return True
        portable = context.owner_expression(scope, value)
        if portable is None:
            message = explain.precision_switch(context.facts, scope, value)
            context.block_file(Finding(code="MIG900", node=call, message=message))
            return False
        code, names = portable
        conditions.append(code)
        depends.extend(names)
        return True

    # -- GradScaler --------------------------------------------------------------------------
    def _made_scalers(self, context: RuleContext, scopes):
        """(scope, name, binding) of each `name = GradScaler(...)` the training scopes see."""
        facts = context.facts
        methods = [m for s in scopes if is_method(s) for m in class_methods(s)]
        for scope in {id(s): s for s in [*scopes, *methods, facts.index.module_scope]}.values():
            for name, bindings in scope.bindings.items():
                for binding in bindings:
                    value = binding.value
                    if (
                        binding.kind == "assign"
                        and isinstance(value, ast.Call)
                        and (patterns.is_grad_scaler_call(value, facts.index.imports))
                    ):
                        yield scope, name, binding

    def _dance_only(self, context: RuleContext, scope: Scope, name: str, depth=0) -> bool:
        """Whether `_rewrite_uses` can take the scaler's every use away (it edits nothing)."""
        scopes = class_methods(scope) if name.startswith("self.") else [scope]
        uses = [u for s in scopes for d in [s, *s.descendants()] for u in d.uses.get(name, [])]
        for use in uses:
            if use.kind == "arg" and depth < 4:
                parameter = handed_to_parameter(context.facts.index, use)
                if parameter is not None and self._dance_only(context, *parameter, depth + 1):
                    continue
                return False
            if use.kind != "attr" or use.call is None or use.attr not in SCALER_METHODS:
                return False
        return True

    def _scalers(self, context, scopes, conditions, depends) -> bool | None:
        """Remove scalers and their dance; True if one was found, None if one can't be."""
        facts = context.facts
        imports = facts.index.imports
        found = False
        # a helper class's scaler (`self._scaler` of a loss scaler whose `__call__` steps) is
        # bound in its `__init__`, which is no training scope itself
        methods = [m for s in scopes if is_method(s) for m in class_methods(s)]
        for scope in {id(s): s for s in [*scopes, *methods, facts.index.module_scope]}.values():
            for name, bindings in scope.bindings.items():
                calls = [b for b in bindings if b.kind == "assign" and isinstance(b.value, ast.Call)
                         and patterns.is_grad_scaler_call(b.value, imports)]  # fmt: skip
                if not calls:
                    continue
                if len(calls) != len(bindings) or any(b.unpacked for b in calls):
                    context.block_file(
                        Finding(
                            code="MIG900",
                            node=calls[0].value,
                            message=(
                                f"GradScaler `{name}` is rebound; migrate mixed precision by hand"
                            ),
                        )
                    )
                    return None
                self.handed = False
                if not self._rewrite_uses(context, scope, name):
                    return None
                for binding in calls:
                    # `GradScaler(enabled=False)`: its dance goes all the same, and no fp16
                    if self._enabled(context, scope, binding.value, conditions, depends):
                        found = True
                    if self.handed:  # passed to a function: it gets the accelerator's scaler
                        context.edits.replace_with(
                            binding.value, context.accelerator_expr("scaler")
                        )
                        context.need_accelerator_at(binding.statement)
                    else:
                        context.edits.remove(binding.small)
                    self.rewritten.add(imports.qualify(binding.value.func) or "")
        return found

    def _rewrite_uses(self, context: RuleContext, scope: Scope, name: str, depth=0) -> bool:
        uses = []
        # `self.scaler` is used across the class's methods; a local scaler in its scope.
        scopes = class_methods(scope) if name.startswith("self.") else [scope]
        for current in [d for s in scopes for d in [s, *s.descendants()]]:
            uses.extend(current.uses.get(name, []))
        handed = [use for use in uses if use.kind == "arg" and depth < 4]
        for use in handed:  # `train(loader, model, optimizer, scaler, epoch)` (MoCo v3)
            parameter = handed_to_parameter(context.facts.index, use)
            if parameter is not None and self._rewrite_uses(context, *parameter, depth + 1):
                self.handed = True
                uses.remove(use)
            elif parameter is not None:
                return False
        for use in uses:
            if use.kind != "attr" or use.call is None or use.attr not in SCALER_METHODS:
                context.block_file(Finding(code="MIG900", node=use.node, message=(
                    f"GradScaler `{name}` is used beyond scale/step/update/unscale_/state_dict; "
                    "migrate mixed precision by hand")))  # fmt: skip
                return False
        for use in uses:
            call = use.call
            args = call_args(call)
            if use.attr == "scale" and len(args) == 1:
                context.edits.replace(call, _first_argument(args[0].value))
            elif use.attr == "step" and len(args) >= 1:
                context.edits.replace(call, _step_of(args[0].value), drops=[call.func])
            elif use.attr in ("state_dict", "load_state_dict"):
                if not self._rewrite_state(context, name, use):
                    return False
            elif use.attr == "unscale_" and len(args) == 1 and not _clips_after(use):
                # the gradients read unscaled after it (a norm logged without clipping): the
                # accelerator's scaler unscales them; before a clip, clip_grad_norm_ does
                unscale = context.accelerator_expr("unscale_gradients")
                optimizer = args[0].value
                context.edits.replace(call, lambda _text, renderer, unscale=unscale, o=optimizer: (
                    f"{unscale}({renderer.text_of(o)})"), drops=[call.func])  # fmt: skip
            elif use.attr in ("update", "unscale_"):
                small = _expression_statement(context, use)
                if small is None:
                    context.block_file(
                        Finding(
                            code="MIG900",
                            node=call,
                            message=(f"`{name}.{use.attr}()` used as a value; migrate by hand"),
                        )
                    )
                    return False
                context.edits.remove(small)
        return True

    def _rewrite_state(self, context: RuleContext, name: str, use) -> bool:
        """The scaler's state is the Accelerator's (`accelerator.scaler`: None unless fp16),
        so a checkpoint keeps its key: `scaler.state_dict()` -> the accelerator scaler's state
        (`{}` without one, as a disabled GradScaler gives), `scaler.load_state_dict(s)` -> loaded
        into the accelerator's scaler when there is one."""
        call = use.call
        args = call_args(call)
        scaler = context.accelerator_expr("scaler")
        small = _expression_statement(context, use)
        if use.attr == "state_dict" and not args:
            code = f"{scaler}.state_dict() if {scaler} is not None else {{}}"
            bare = _stands_alone(_small_of(use), call)
            context.edits.replace_with(call, code if bare else f"({code})")
            return True
        alone = isinstance(use.statement.node, Line) and len(use.statement.node.body) == 1
        indent = _indent_of(context, small) if small is not None and alone else None
        if use.attr == "load_state_dict" and len(args) == 1 and indent is not None:
            state = args[0].value
            newline = context.source.newline
            context.edits.replace(small, lambda _text, renderer: (
                f"if {scaler} is not None:{newline}{indent}    "
                f"{scaler}.load_state_dict({renderer.text_of(state)})"))  # fmt: skip
            return True
        context.block_file(Finding(code="MIG900", node=call, message=(
            f"`{name}.{use.attr}(...)` is not a plain statement or call; move the GradScaler "
            "state to accelerator.scaler by hand")))  # fmt: skip
        return False


def _clips_after(use) -> bool:
    """Whether a gradient clip follows `scaler.unscale_(...)`: later in its block, or after a
    statement that encloses it (`if ...: scaler.unscale_(opt)` then a clip). There the
    accelerator's clip_grad_norm_ unscales, and a second unscale_ would raise, so the unscale_
    goes; where no clip follows (a norm logged unclipped) it stays, as unscale_gradients."""
    innermost = use.statement
    for statement in innermost.chain():
        start = statement.index + (statement is not innermost)  # an enclosing `if` itself: no
        for later in statement.block.statements[start:]:
            nodes = later.body if isinstance(later, Line) else [later]
            for inner in (found for node in nodes for found in ast.walk(node)):
                if isinstance(inner, ast.Call) and _called_name(inner) in CLIPS:
                    return True
    return False


def _called_name(call: ast.Call) -> str | None:
    func = call.func
    return func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", None)


def _small_of(use) -> ast.stmt | None:
    statement = use.statement.node
    if isinstance(statement, Line):
        for small in statement.body:
            if any(node is use.call for node in ast.walk(small)):
                return small
    return None


def _stands_alone(small: ast.stmt | None, call: ast.Call) -> bool:
    """Whether a conditional expression in place of `call` needs no parentheses: the value
    of a return or assignment, of a dict entry, or an argument."""
    if isinstance(small, (ast.Return, ast.Assign)) and small.value is call:
        return True
    for node in ast.walk(small) if small is not None else ():
        if isinstance(node, ast.Dict) and any(value is call for value in node.values):
            return True
        if isinstance(node, ast.Call) and any(a is call for a in node.args):
            return True
        if isinstance(node, ast.keyword) and node.value is call:
            return True
    return False


def _indent_of(context: RuleContext, small: ast.stmt) -> str | None:
    """The indentation of a statement at the start of its line (None otherwise)."""
    line = context.source.text.splitlines()[small.lineno - 1]
    prefix = line[: small.col_offset]
    return prefix if not prefix.strip() else None


def _first_argument(value: ast.expr):
    return lambda _text, renderer: renderer.text_of(value)


def _step_of(optimizer: ast.expr):
    return lambda _text, renderer: f"{renderer.text_of(optimizer)}.step()"


def _expression_statement(context: RuleContext, use) -> ast.stmt | None:
    statement = use.statement.node
    if isinstance(statement, Line):
        for small in statement.body:
            if isinstance(small, ast.Expr) and small.value is use.call:
                return small
    return None
