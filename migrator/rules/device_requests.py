"""Whether a script's device choice picks the CPU, as the Accelerator's `cpu=` argument
(SPEC §3b.5: CPU flags become `Accelerator(cpu=...)`).

The Accelerator picks this process's GPU whenever CUDA is there, so `cpu=` must be true exactly
when the original, on a machine with CUDA, would have trained on the CPU. A device expression is
read with CUDA (or the accelerator it asks about) assumed present:

- `"cpu"` / `torch.device("cpu")`: the CPU; `"cuda"`, `"mps"`, `torch.device("cuda", 1)`,
  `torch.accelerator.current_accelerator()`, a model's or a batch's `.device`: not;
- `"cuda" if c else "cpu"`, `if c: device = ... else: ...` (any chain, placeholders before it):
  by the condition, `torch.cuda.is_available()` read as true, names followed to their value
  (`use_cuda = not args.no_cuda and torch.cuda.is_available()` is `not args.no_cuda`);
- a flag (`args.device`, `cfg.device`, never assigned a device by the script): `args.device ==
  "cpu"`;
- a call of this file's function (`choose_device(args.device)`): its returns, by the paths
  that reach them, its parameters read as the call's arguments;
- a parameter: what every call passes (a Trainer's `device=` from its constructor's calls).

None when it cannot be read (an imported helper, a value the Accelerator's code cannot see);
the rule says so in a note.
"""

from __future__ import annotations

import ast
import re

from migrator.analysis.catalogue import patterns
from migrator.analysis.distributed.facts import RANK_KINDS
from migrator.analysis.model.dataflow import data_root
from migrator.analysis.model.instances import module_classes
from migrator.analysis.model.origins import (
    argument_for,
    bindings_of,
    is_method,
    param_default,
    value_call,
)
from migrator.analysis.syntax.imports import dotted_name
from migrator.analysis.syntax.index import Scope
from migrator.rules.cpu_conditions import (
    COMPARISON,
    FALSE,
    TRUE,
    Cond,
    both,
    comparison,
    either,
    leaf,
    negate,
)
from migrator.rules.script_values import (
    UNSET,
    ValueReader,
    asks_availability,
    bound_argument,
    defining,
    merge,
    returns_in,
)

MAX_DEPTH = 8
CONFIG_NAMES = re.compile(
    r"(^|_)(args|opts?|options|config|cfg|conf|hparams|hp|params|settings|flags|hyperparams)$",
    re.IGNORECASE,
)
PARSERS = {"parse_args", "parse_known_args", "parse_args_into_dataclasses"}
OPERATORS = {ast.Eq: "==", ast.NotEq: "!=", ast.Is: "is", ast.IsNot: "is not", ast.In: "in",
             ast.NotIn: "not in", ast.Lt: "<", ast.LtE: "<=", ast.Gt: ">", ast.GtE: ">="}  # fmt: skip


class CpuRequests(ValueReader):
    # -- devices -----------------------------------------------------------------------------
    def device(self, expr, scope: Scope, env=None, depth: int = 0) -> Cond | None:
        """When the device `expr` names is the CPU (CUDA present); None: cannot tell."""
        if expr is None or depth > MAX_DEPTH:
            return None
        text = patterns.string_value(expr)
        if text is not None:
            if text == "cpu" or text.startswith("cpu:"):
                return TRUE
            return FALSE if patterns.DEVICE_STRING.match(text) else None
        if isinstance(expr, ast.Constant) and type(expr.value) is int:
            return FALSE  # `.to(0)`: a GPU index
        if self.rank(expr, scope):
            return FALSE  # `.to(local_rank)`, `.to(self.gpu_id)`: this process's GPU
        if isinstance(expr, ast.JoinedStr):  # f"cuda:{rank}"
            head = expr.values[0] if expr.values else None
            return FALSE if isinstance(head, ast.Constant) and str(head.value)[:4] in (
                "cuda", "mps:", "xpu:") else None  # fmt: skip
        if isinstance(expr, ast.IfExp):
            return merge(self.test(expr.test, scope, env, depth + 1),
                          self.device(expr.body, scope, env, depth + 1),
                          self.device(expr.orelse, scope, env, depth + 1))  # fmt: skip
        if isinstance(expr, ast.Call):
            return self._called(expr, scope, env, depth)
        if patterns.is_accelerator_device(expr, self.facts.accelerator_names):
            return FALSE
        if isinstance(expr, ast.Name):
            bound = bound_argument(env, scope, expr.id)
            if bound is not None:
                return self.device(bound[0], bound[1], bound[2], depth + 1)
            found = self._named(expr, scope, env, depth, self.device)
            return FALSE if found is UNSET else found  # UNSET: what a caller elsewhere passes
        if isinstance(expr, ast.Attribute):
            if self.follows_object(expr.value, scope):
                return FALSE  # `model.device`, `batch.device`, `next(model.parameters()).device`
            found = self._named(expr, scope, env, depth, self.device)
            if found is not UNSET:
                return found
            if not self.config_holder(expr, scope):
                return None
            flag = self._portable(expr, scope, env)  # `args.device`: a string the user passes
            return comparison(flag[0], "==", '"cpu"', flag[1]) if flag is not None else None
        return None

    def rank(self, expr, scope: Scope) -> bool:
        name = patterns.name_of(expr)
        if name is not None and self.facts.rank_kind(scope, name) in RANK_KINDS:
            return True
        launch = self.facts.distributed.launch  # `args.gpu` holding this process's index
        return launch is not None and isinstance(expr, ast.Attribute) and any(
            dotted_name(expr) == f"{launch.base}.{attribute}"
            for attribute, kind in launch.kinds.items() if kind in RANK_KINDS
        )  # fmt: skip

    def _called(self, call: ast.Call, scope: Scope, env, depth: int) -> Cond | None:
        called = self.imports.qualify(call.func) or dotted_name(call.func) or ""
        if called in ("torch.accelerator.current_accelerator", "int"):
            return FALSE  # `int(os.environ["LOCAL_RANK"])`: a GPU index
        if called == "torch.device" or called.endswith(".device"):  # `torch_module.device(x)`
            given = call.args[0] if call.args else patterns.keyword(call, "type")
            given = given.value if isinstance(given, ast.keyword) else given
            return self.device(given, scope, env, depth + 1)
        function = self.index.functions.get(dotted_name(call.func) or "")
        if function is None or function.kind != "function" or is_method(function):
            return None
        return self._returns(function, call, scope, env, depth)

    def config_holder(self, expr, scope: Scope) -> bool:
        """`args.device`, `cfg.train.device`, `Config.DEVICE`, `self.opt.device`: read from
        the command line's namespace or a configuration, not from a tensor."""
        root = patterns.root_name(expr)
        if root is None:
            return False
        name = root.split(".")[-1]
        if CONFIG_NAMES.search(name) or name in module_classes(self.index):
            return True
        origin = self.facts.origin(scope, root)
        return any(
            (call := value_call(b)) is not None
            and patterns.last_part(dotted_name(call.func) or "") in PARSERS
            for b in bindings_of(origin)
        )

    def follows_object(self, expr, scope: Scope) -> bool:
        """`x.device` of a model, a batch or a call's result: where that object is, which
        prepare decides; not a flag the user chose."""
        if isinstance(expr, (ast.Call, ast.Subscript)):
            return True
        root = patterns.root_name(expr)
        if root is None:
            return False
        if self.facts.role(scope, root) == "model":
            return True
        return any(r.scope is scope and data_root(expr, r.names) for r in self.facts.regions)

    def _returns(self, function: Scope, call: ast.Call, scope: Scope, env, depth: int):
        """A call of this file's function: its returns, each under the path reaching it."""
        if any(isinstance(a, ast.Starred) for a in call.args) or any(
            k.arg is None for k in call.keywords
        ):
            return None
        mapping = {}
        for param in function.params:
            argument = argument_for(call, function, param)
            if argument is not None:
                mapping[param] = (argument, scope, env)
            elif (default := param_default(function, param)) is not None:
                mapping[param] = (default, function.parent, None)
        inner = (function, mapping)
        found, _ = self._walk(function.node.body, TRUE, function, inner, depth + 1)
        if found is None:
            return None
        result = FALSE
        for path, value in found:
            if path is None or value is None:
                return None
            result = either(result, both(path, value))
        return result

    def _walk(self, statements, path, function: Scope, env, depth: int):
        """([(path, cpu?)] of the returns in `statements`, whether they always return)."""
        found = []
        for node in statements:
            if isinstance(node, ast.Return):
                found.append((path, self.device(node.value, function, env, depth)))
                return found, True
            if isinstance(node, ast.Raise):
                return found, True
            if not returns_in(node):
                continue
            if not isinstance(node, ast.If):
                return None, False  # a return inside a loop, a try, a with
            test = self.test(node.test, function, env, depth)
            if test is None:
                return None, False
            body, body_ends = self._walk(node.body, both(path, test), function, env, depth)
            other, other_ends = self._walk(node.orelse, both(path, negate(test)), function,
                                           env, depth)  # fmt: skip
            if body is None or other is None:
                return None, False
            found += body + other
            if body_ends and other_ends:
                return found, True
            if body_ends:
                path = both(path, negate(test))
            elif other_ends:
                path = both(path, test)
        return found, False

    # -- conditions --------------------------------------------------------------------------
    def test(self, expr, scope: Scope, env=None, depth: int = 0) -> Cond | None:
        """When `expr` is true, CUDA present; None: cannot tell."""
        if expr is None or depth > MAX_DEPTH:
            return None
        if isinstance(expr, ast.Constant) and isinstance(expr.value, bool):
            return TRUE if expr.value else FALSE
        if asks_availability(expr, self.imports) or _main_guard(expr):
            return TRUE  # `if __name__ == "__main__":`: the script is run
        if isinstance(expr, ast.IfExp):  # `True if torch.cuda.is_available() else False`
            return merge(*(self.test(e, scope, env, depth + 1)
                           for e in (expr.test, expr.body, expr.orelse)))  # fmt: skip
        if isinstance(expr, ast.UnaryOp) and isinstance(expr.op, ast.Not):
            inner = self.test(expr.operand, scope, env, depth + 1)
            return negate(inner) if inner is not None else None
        if isinstance(expr, ast.BoolOp):
            parts = [self.test(value, scope, env, depth + 1) for value in expr.values]
            if any(p is None for p in parts):
                return None
            return both(*parts) if isinstance(expr.op, ast.And) else either(*parts)
        if isinstance(expr, ast.Name):
            bound = bound_argument(env, scope, expr.id)
            if bound is not None:
                return self.test(bound[0], bound[1], bound[2], depth + 1)
            if defining(scope, expr.id) == ("param", self.facts.owner):
                return self._leaf(expr, scope, env)  # `use_cpu`: where the Accelerator is made
        if isinstance(expr, (ast.Name, ast.Attribute)):
            found = self._named(expr, scope, env, depth, self.test)
            if found is not UNSET and found is not None:
                return found
        return self._leaf(expr, scope, env)

    def _leaf(self, expr, scope: Scope, env) -> Cond | None:
        if isinstance(expr, ast.Compare) and len(expr.ops) == 1:
            left = self._portable(expr.left, scope, env)
            right = self._portable(expr.comparators[0], scope, env)
            op = OPERATORS.get(type(expr.ops[0]))
            if left is None or right is None or op is None:
                return None
            return comparison(left[0], op, right[0], (*left[1], *right[1]))
        found = self._portable(expr, scope, env)
        return leaf(found[0], found[1]) if found is not None else None


__all__ = ["COMPARISON", "CpuRequests"]


def _main_guard(expr) -> bool:
    return (
        isinstance(expr, ast.Compare)
        and isinstance(expr.left, ast.Name)
        and expr.left.id == "__name__"
        and patterns.string_value(expr.comparators[0]) == "__main__"
    )
