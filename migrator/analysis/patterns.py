"""Recognisers for the torch vocabulary: which calls build optimizers, loaders, schedulers, devices.

Each takes qualified names (from the import-alias table) or plain CST expressions; none walks
the tree. Kept apart from roles.py so rules and analysis share one vocabulary.
"""

from __future__ import annotations

import re

import libcst as cst

from migrator.analysis.imports import ImportTable, dotted_name

OPTIMIZER_CLASSES = {
    "SGD", "Adam", "AdamW", "Adagrad", "Adadelta", "Adamax", "ASGD", "LBFGS", "NAdam", "RAdam",
    "RMSprop", "Rprop", "SparseAdam", "Adafactor", "Lion", "Muon", "Adam8bit", "AdamW8bit",
    "PagedAdamW", "PagedAdamW8bit", "Lamb", "LAMB", "FusedAdam", "FusedLAMB", "FusedSGD",
}  # fmt: skip
SCHEDULER_FACTORIES = re.compile(r"(^|\.)(get_\w*schedule\w*|\w*LR|\w*Scheduler\w*|\w*_lr_\w*)$")
LOADER_CLASSES = {"DataLoader", "StatefulDataLoader"}
SCALER_CLASSES = {"GradScaler"}
ACCELERATOR_CLASSES = {"Accelerator"}
LOADER_WRAPPERS = {
    "enumerate", "iter", "tqdm", "tqdm.tqdm", "tqdm.auto.tqdm", "tqdm.notebook.tqdm",
    "tqdm.rich.tqdm", "rich.progress.track", "track",
}  # fmt: skip
DEVICE_STRING = re.compile(r"^(cuda|cpu|mps|xpu|npu|hpu)(:\d+)?$")
LOSS_NAME = re.compile(r"(loss|criterion)", re.IGNORECASE)
# Tensor methods that keep a tensor on its device: data reached through them is still on the
# device a prepared loader put it on.
DEVICE_PRESERVING_METHODS = {
    "view", "reshape", "float", "double", "half", "bfloat16", "long", "int", "short", "bool",
    "squeeze", "unsqueeze", "permute", "transpose", "contiguous", "flatten", "t", "clone",
    "detach", "requires_grad_", "to", "cuda", "expand", "repeat", "narrow", "type_as", "view_as",
}  # fmt: skip


def last_part(qualified: str | None) -> str:
    return (qualified or "").rsplit(".", 1)[-1]


def is_optimizer_call(call: cst.Call, imports: ImportTable) -> bool:
    qualified = imports.qualify(call.func) or ""
    if ".lr_scheduler." in qualified:
        return False
    name = last_part(qualified)
    if qualified.startswith("torch.optim.") and name[:1].isupper():
        return True
    if name in OPTIMIZER_CLASSES:
        return True
    # An unknown class fed `model.parameters()` is an optimizer in every script we studied.
    first = call.args[0].value if call.args and call.args[0].keyword is None else None
    params_kw = next((a.value for a in call.args if _kw(a) == "params"), None)
    feed = first if first is not None else params_kw
    return (
        feed is not None
        and name[:1].isupper()
        and bool(parameter_roots(feed))
        and not SCHEDULER_FACTORIES.search(qualified)
    )


def is_scheduler_call(call: cst.Call, imports: ImportTable) -> bool:
    qualified = imports.qualify(call.func) or ""
    if ".lr_scheduler." in qualified:
        return True
    return bool(SCHEDULER_FACTORIES.search(qualified)) and not is_loader_call(call, imports)


def is_loader_call(call: cst.Call, imports: ImportTable) -> bool:
    return last_part(imports.qualify(call.func)) in LOADER_CLASSES


def is_scaler_call(call: cst.Call, imports: ImportTable) -> bool:
    return last_part(imports.qualify(call.func)) in SCALER_CLASSES


def is_accelerator_call(call: cst.Call, imports: ImportTable) -> bool:
    return last_part(imports.qualify(call.func)) in ACCELERATOR_CLASSES


def _kw(arg: cst.Arg) -> str | None:
    return arg.keyword.value if arg.keyword is not None else None


def parameter_roots(expr: cst.CSTNode) -> list[str]:
    """Names whose `.parameters()` / `.named_parameters()` feed an optimizer expression."""
    roots: list[str] = []

    class _Finder(cst.CSTVisitor):
        def visit_Call(self, node: cst.Call) -> None:
            func = node.func
            if isinstance(func, cst.Attribute) and func.attr.value in (
                "parameters",
                "named_parameters",
            ):
                root = root_name(func.value)
                if root is not None and root not in roots:
                    roots.append(root)

    expr.visit(_Finder())
    return roots


SELF = "self"


def name_of(expr: cst.BaseExpression | None) -> str | None:
    """The name an expression stands for: `model`, or `self.model` for an instance attribute
    (a Trainer's objects are named that way across its methods)."""
    if isinstance(expr, cst.Name):
        return expr.value
    if (
        isinstance(expr, cst.Attribute)
        and isinstance(expr.value, cst.Name)
        and expr.value.value == SELF
    ):
        return f"{SELF}.{expr.attr.value}"
    return None


def expression_for(name: str) -> cst.BaseExpression:
    """The expression for a name from `name_of` (`self.model` -> Attribute)."""
    head, _, attribute = name.partition(".")
    if attribute:
        return cst.Attribute(value=cst.Name(head), attr=cst.Name(attribute))
    return cst.Name(head)


def root_name(expr: cst.BaseExpression) -> str | None:
    """`model` for `model`, `model.encoder`, `model.module.encoder`; `self.model` for
    `self.model.encoder`; None otherwise."""
    while isinstance(expr, cst.Attribute):
        if name_of(expr) is not None and isinstance(expr.value, cst.Name):
            return name_of(expr)
        expr = expr.value
    return expr.value if isinstance(expr, cst.Name) else None


def loader_base(expr: cst.BaseExpression | None, imports: ImportTable):
    """(name, through_enumerate) of the loader a `for` iterates, unwrapping enumerate/tqdm/iter."""
    through_enumerate = False
    while isinstance(expr, cst.Call):
        callee = imports.qualify(expr.func)
        if callee not in LOADER_WRAPPERS or not expr.args or expr.args[0].keyword is not None:
            return None, False
        if callee == "enumerate":
            through_enumerate = True
        expr = expr.args[0].value
    name = name_of(expr)
    if name is not None:
        return name, through_enumerate
    return None, False


def string_value(expr: cst.BaseExpression) -> str | None:
    if isinstance(expr, cst.SimpleString):
        try:
            value = expr.evaluated_value
        except (ValueError, SyntaxError):  # pragma: no cover - malformed literal
            return None
        return value if isinstance(value, str) else None
    return None


def is_device_literal(expr: cst.BaseExpression) -> bool:
    value = string_value(expr)
    return value is not None and bool(DEVICE_STRING.match(value))


def is_device_constructor(expr: cst.BaseExpression, imports: ImportTable) -> bool:
    """A device value built from scratch: "cuda", torch.device(...), "cuda" if ... else "cpu"."""
    if is_device_literal(expr):
        return True
    if (
        isinstance(expr, cst.FormattedString)
        and len(expr.parts) == 2
        and isinstance(expr.parts[0], cst.FormattedStringText)
    ):  # f"cuda:{local_rank}" (MIG010)
        return bool(DEVICE_STRING.match(expr.parts[0].value + "0"))
    if isinstance(expr, cst.IfExp):
        return is_device_constructor(expr.body, imports) or is_device_constructor(
            expr.orelse, imports
        )
    if isinstance(expr, cst.Call):
        qualified = imports.qualify(expr.func) or ""
        if qualified in ("torch.device", "torch.accelerator.current_accelerator"):
            return True
    return False


def is_accelerator_device(expr: cst.BaseExpression, accelerator_names: set[str]) -> bool:
    return (
        isinstance(expr, cst.Attribute)
        and expr.attr.value == "device"
        and name_of(expr.value) in accelerator_names
    )


def looks_like_device_name(name: str) -> bool:
    return name in ("device", "dev") or name.endswith("_device")


def is_devicey(expr: cst.BaseExpression, device_names: set[str], imports: ImportTable) -> bool:
    """Could `expr` be a device (as opposed to a dtype or a tensor) in `x.to(expr)`?"""
    if isinstance(expr, cst.Name):
        return expr.value in device_names or looks_like_device_name(expr.value)
    if isinstance(expr, cst.Attribute):
        return expr.attr.value in ("device", "local_rank") or (  # args.local_rank (MIG010)
            expr.attr.value.endswith("_device") and dotted_name(expr) is not None
        )
    return is_device_constructor(expr, imports)


def placement_call(call: cst.Call, device_names: set[str], imports: ImportTable) -> str | None:
    """ "to" for `x.to(device, ...)`, "cuda" for `x.cuda()`, None for anything else.

    `.to(torch.float16)` (a dtype) and `.cuda(1)` (an explicit index: a finding, not ours) are
    not placement calls.
    """
    if not isinstance(call.func, cst.Attribute):
        return None
    method = call.func.attr.value
    positional = [a for a in call.args if a.keyword is None and not a.star]
    if method == "cuda":
        given = [*positional, *(a for a in call.args if _kw(a) == "device")]
        if given and not (  # `.cuda(local_rank)` names this process's device (MIG010)
            len(given) == 1 and isinstance(given[0].value, (cst.Name, cst.Attribute))
            and is_devicey(given[0].value, device_names, imports)
        ):  # fmt: skip
            return None
        return "cuda"
    if method != "to":
        return None
    if positional and is_devicey(positional[0].value, device_names, imports):
        return "to"
    device_kw = next((a for a in call.args if _kw(a) == "device"), None)
    if device_kw is not None and is_devicey(device_kw.value, device_names, imports):
        return "to"
    return None


def has_explicit_index(expr: cst.BaseExpression) -> bool:
    value = string_value(expr)
    if isinstance(expr, cst.FormattedString):  # f"cuda:{i}"
        value = "".join(p.value for p in expr.parts if isinstance(p, cst.FormattedStringText))
    return value is not None and ":" in value


# -- issue 5 vocabulary: mixed precision, clipping, progress bars, checkpoints, DataParallel ----
AUTOCAST_CALLS = {
    "torch.autocast", "torch.amp.autocast", "torch.cuda.amp.autocast", "torch.cpu.amp.autocast",
    "torch.amp.autocast_mode.autocast",
}  # fmt: skip
CUDA_ONLY_AUTOCAST = {"torch.cuda.amp.autocast"}
AUTOCAST_WITH_DEVICE = ("torch.autocast", "torch.amp.autocast")  # (device_type, dtype, ...)
GRAD_SCALERS = {"torch.cuda.amp.GradScaler", "torch.amp.GradScaler", "torch.GradScaler",
                "torch.cpu.amp.GradScaler", "torch.amp.grad_scaler.GradScaler"}  # fmt: skip
CLIP_FUNCTIONS = {
    "torch.nn.utils.clip_grad_norm_": "clip_grad_norm_",
    "torch.nn.utils.clip_grad_value_": "clip_grad_value_",
    "torch.nn.utils.clip_grad.clip_grad_norm_": "clip_grad_norm_",
    "torch.nn.utils.clip_grad.clip_grad_value_": "clip_grad_value_",
}
PROGRESS_BARS = {"tqdm", "tqdm.tqdm", "tqdm.auto.tqdm", "tqdm.notebook.tqdm", "tqdm.trange",
                 "tqdm.auto.trange", "trange"}  # fmt: skip
DATA_PARALLEL = {"torch.nn.DataParallel", "torch.nn.parallel.DataParallel",
                 "torch.nn.parallel.data_parallel.DataParallel"}  # fmt: skip
HALF_DTYPES = {"torch.float16", "torch.half"}
BF16_DTYPES = {"torch.bfloat16"}


def keyword(call: cst.Call, name: str) -> cst.Arg | None:
    return next((a for a in call.args if _kw(a) == name), None)


def positional(call: cst.Call) -> list[cst.Arg]:
    return [a for a in call.args if a.keyword is None and not a.star]


def autocast_precision(call: cst.Call, imports: ImportTable) -> tuple[str | None, bool] | None:
    """(precision, cuda_only) of an autocast call: fp16 / bf16, or None for a dtype that is not
    a literal one; None if it is not autocast."""
    qualified = imports.qualify(call.func) or ""
    if qualified not in AUTOCAST_CALLS:
        return None
    device_arg = keyword(call, "device_type")
    args = positional(call)
    if device_arg is None and args and qualified in AUTOCAST_WITH_DEVICE:
        device_arg = args[0]
    device = string_value(device_arg.value) if device_arg is not None else None
    if qualified == "torch.cpu.amp.autocast":
        device = "cpu"
    cuda_only = qualified in CUDA_ONLY_AUTOCAST or device == "cuda"
    dtype_arg = keyword(call, "dtype")
    if dtype_arg is None and len(args) > 1 and qualified in AUTOCAST_WITH_DEVICE:
        dtype_arg = args[1]
    dtype = imports.qualify(dtype_arg.value) if dtype_arg is not None else None
    if dtype in BF16_DTYPES:
        return "bf16", cuda_only
    if dtype in HALF_DTYPES:
        return "fp16", cuda_only
    if dtype_arg is not None:
        return None, cuda_only  # a dtype chosen at run time: no precision to read
    return ("bf16" if device == "cpu" else "fp16"), cuda_only


def is_cuda_available_call(expr: cst.BaseExpression, imports: ImportTable) -> bool:
    return (
        isinstance(expr, cst.Call)
        and not expr.args
        and (imports.qualify(expr.func) == "torch.cuda.is_available")
    )


def is_grad_scaler_call(call: cst.Call, imports: ImportTable) -> bool:
    return (imports.qualify(call.func) or "") in GRAD_SCALERS or is_scaler_call(call, imports)
