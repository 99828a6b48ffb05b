"""Recognisers for the torch vocabulary: which calls build optimizers, loaders, schedulers, devices.

Each takes qualified names (from the import-alias table) or plain `ast` expressions; none walks
the tree. Kept apart from roles.py so rules and analysis share one vocabulary.
"""

from __future__ import annotations

import ast
import re

from migrator.analysis.syntax.imports import ImportTable, dotted_name
from migrator.analysis.syntax.views import (  # noqa: F401 - the shared vocabulary, re-exported
    SELF,
    Arg,
    call_args,
    keyword,
    name_of,
    name_value,
    positional,
    preorder,
    root_name,
)

OPTIMIZER_CLASSES = {
    "SGD", "Adam", "AdamW", "Adagrad", "Adadelta", "Adamax", "ASGD", "LBFGS", "NAdam", "RAdam",
    "RMSprop", "Rprop", "SparseAdam", "Adafactor", "Lion", "Muon", "Adam8bit", "AdamW8bit",
    "PagedAdamW", "PagedAdamW8bit", "Lamb", "LAMB", "FusedAdam", "FusedLAMB", "FusedSGD",
}  # fmt: skip
SCHEDULER_FACTORIES = re.compile(r"(^|\.)(get_\w*schedule\w*|\w*LR|\w*Scheduler\w*|\w*_lr_\w*)$")
LOADER_CLASSES = {"DataLoader", "StatefulDataLoader"}
DATASET_BASES = {"Dataset", "IterableDataset", "TensorDataset"}
# Data sets built whole on every process: torch's own, and the catalogues of the domain libraries
DATASET_CLASSES = {"TensorDataset", "ConcatDataset", "ImageFolder", "DatasetFolder"}
DATASET_MODULES = ("torchvision.datasets.", "torchaudio.datasets.", "torchtext.datasets.",
                   "torch_geometric.datasets.")  # fmt: skip
SCALER_CLASSES = {"GradScaler"}
ACCELERATOR_CLASSES = {"Accelerator"}
# tqdm's bar class under each of its module paths (`from tqdm import tqdm_notebook`, the
# legacy notebook spelling, `tqdm.autonotebook`, `tqdm.std`)
TQDM_CLASSES = {
    "tqdm", "tqdm.tqdm", "tqdm.auto.tqdm", "tqdm.notebook.tqdm", "tqdm.rich.tqdm",
    "tqdm.autonotebook.tqdm", "tqdm.std.tqdm", "tqdm.tqdm_notebook",
    "tqdm.notebook.tqdm_notebook", "tqdm.gui.tqdm", "tqdm.tqdm_gui",
}  # fmt: skip
LOADER_WRAPPERS = {"enumerate", "iter", "rich.progress.track", "track", *TQDM_CLASSES}
# Calls that yield the items of their first argument (`islice(loader, n)`), of every positional
# argument (`zip(a, b)`), and methods known to do so by name (the MetricLogger of torchvision's
# references, copied into DETR, DINO, DeiT, MAE: `metric_logger.log_every(loader, freq, header)`).
ITEM_WRAPPERS = LOADER_WRAPPERS | {
    "itertools.islice", "islice", "tqdm.contrib.tenumerate", "itertools.cycle",
}  # fmt: skip
# Calls that return an iterator `next()` draws the items of their first argument from
ITERATOR_CALLS = {"iter", "itertools.cycle", "itertools.islice"}
ZIP_WRAPPERS = {"zip", "itertools.zip_longest", "zip_longest"}
ITEM_WRAPPER_METHODS = {"log_every"}
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


def is_optimizer_call(call: ast.Call, imports: ImportTable) -> bool:
    qualified = imports.qualify(call.func) or ""
    if ".lr_scheduler." in qualified:
        return False
    name = last_part(qualified)
    if qualified.startswith("torch.optim.") and name[:1].isupper():
        return True
    if name in OPTIMIZER_CLASSES:
        return True
    # An unknown class fed `model.parameters()` is an optimizer in every script we studied.
    args = call_args(call)
    first = args[0].value if args and args[0].keyword is None else None
    params_kw = next((a.value for a in args if a.keyword == "params"), None)
    feed = first if first is not None else params_kw
    return (
        feed is not None
        and name[:1].isupper()
        and bool(parameter_roots(feed) or unnamed_parameter_owners(feed))
        and not SCHEDULER_FACTORIES.search(qualified)
    )


def is_scheduler_call(call: ast.Call, imports: ImportTable) -> bool:
    qualified = imports.qualify(call.func) or ""
    if ".lr_scheduler." in qualified:
        return True
    return bool(SCHEDULER_FACTORIES.search(qualified)) and not is_loader_call(call, imports)


def is_loader_call(call: ast.Call, imports: ImportTable) -> bool:
    return last_part(imports.qualify(call.func)) in LOADER_CLASSES


def is_dataset_call(call: ast.Call, imports: ImportTable) -> bool:
    qualified = imports.qualify(call.func) or ""
    return last_part(qualified) in DATASET_CLASSES or (
        qualified.startswith(DATASET_MODULES) and last_part(qualified)[:1].isupper()
    )


def is_scaler_call(call: ast.Call, imports: ImportTable) -> bool:
    return last_part(imports.qualify(call.func)) in SCALER_CLASSES


def is_accelerator_call(call: ast.Call, imports: ImportTable) -> bool:
    return last_part(imports.qualify(call.func)) in ACCELERATOR_CLASSES


def parameter_roots(expr: ast.AST) -> list[str]:
    """Names whose `.parameters()` / `.named_parameters()` feed an optimizer expression. A
    comprehension over a literal list of models (`chain(*[m.parameters() for m in (G, F)])`)
    feeds those models; one over anything else names none (`unnamed_parameter_owners`)."""
    elements = _comprehension_elements(expr)
    roots: list[str] = []
    for node in parameter_calls(expr):
        root = root_name(node.func.value)
        found = elements.get(root, [root]) if root is not None else []
        for name in found or []:
            if name not in roots:
                roots.append(name)
    return roots


def unnamed_parameter_owners(expr: ast.AST) -> list[tuple[str, ast.expr]]:
    """(name, iterable) for each `m.parameters()` in a comprehension over something other than
    a literal list of models (`[m.parameters() for m in self.discriminators]`): the models
    cannot be named one by one, so they cannot be prepared one by one."""
    elements = _comprehension_elements(expr)
    iterables = {name: node for name, node in _comprehension_iterables(expr)}
    owners = []
    for node in parameter_calls(expr):
        root = root_name(node.func.value)
        if root in elements and elements[root] is None and root not in dict(owners):
            owners.append((root, iterables[root]))
    return owners


def parameter_calls(expr: ast.AST) -> list[ast.Call]:
    return [
        node
        for node in preorder(expr)
        if isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr in ("parameters", "named_parameters")
    ]


def _comprehension_iterables(expr: ast.AST) -> list[tuple[str, ast.expr]]:
    return [
        (generator.target.id, generator.iter)
        for node in preorder(expr)
        if isinstance(node, (ast.ListComp, ast.SetComp, ast.GeneratorExp))
        for generator in node.generators
        if isinstance(generator.target, ast.Name)
    ]


def _comprehension_elements(expr: ast.AST) -> dict[str, list[str] | None]:
    """Comprehension variable -> the models it runs over: the names of a literal tuple or list
    (`for m in (G_AB, G_BA)`), else None."""
    elements: dict[str, list[str] | None] = {}
    for name, iterable in _comprehension_iterables(expr):
        names = None
        if isinstance(iterable, (ast.Tuple, ast.List)):
            names = [root_name(element) for element in iterable.elts]
            names = names if names and all(n is not None for n in names) else None
        elements[name] = names
    return elements


def expression_for(name: str) -> str:
    """The code for a name from `name_of` (`self.model` is already code)."""
    return name


def loader_base(expr: ast.expr | None, imports: ImportTable):
    """(name, through_enumerate) of the loader a `for` iterates, unwrapping enumerate/tqdm/iter."""
    through_enumerate = False
    while isinstance(expr, ast.Call):
        callee = imports.qualify(expr.func)
        args = call_args(expr) if callee in LOADER_WRAPPERS else None
        if not args or args[0].keyword is not None:
            return None, False
        if callee == "enumerate":
            through_enumerate = True
        expr = args[0].value
    name = name_of(expr)
    if name is not None:
        return name, through_enumerate
    return None, False


def string_value(expr: ast.AST | None) -> str | None:
    if isinstance(expr, ast.Constant) and isinstance(expr.value, str):
        return expr.value
    return None


def is_device_literal(expr: ast.AST) -> bool:
    value = string_value(expr)
    return value is not None and bool(DEVICE_STRING.match(value))


def is_device_constructor(expr: ast.AST, imports: ImportTable) -> bool:
    """A device value built from scratch: "cuda", torch.device(...), "cuda" if ... else "cpu"."""
    if is_device_literal(expr):
        return True
    if (
        isinstance(expr, ast.JoinedStr)
        and len(expr.values) == 2
        and isinstance(expr.values[0], ast.Constant)
    ):  # f"cuda:{local_rank}" (MIG010)
        return bool(DEVICE_STRING.match(expr.values[0].value + "0"))
    if isinstance(expr, ast.IfExp):
        return is_device_constructor(expr.body, imports) or is_device_constructor(
            expr.orelse, imports
        )
    if isinstance(expr, ast.Call):
        qualified = imports.qualify(expr.func) or ""
        if qualified in ("torch.device", "torch.accelerator.current_accelerator"):
            return True
    return _parameters_device(expr)


def _parameters_device(expr: ast.AST) -> bool:
    """`next(model.parameters()).device`: where the model's weights are, which after
    `prepare` is the accelerator's device (before it, the model may still be on the CPU)."""
    if not (isinstance(expr, ast.Attribute) and expr.attr == "device"):
        return False
    call = expr.value
    if not (isinstance(call, ast.Call) and isinstance(call.func, ast.Name)):
        return False
    inner = call.args[0] if call.func.id == "next" and len(call.args) == 1 else None
    return (
        isinstance(inner, ast.Call)
        and isinstance(inner.func, ast.Attribute)
        and inner.func.attr == "parameters"
    )


def is_cpu_device(expr: ast.AST, imports: ImportTable) -> bool:
    """`"cpu"` or `torch.device("cpu")`."""
    if isinstance(expr, ast.Call) and (imports.qualify(expr.func) or "") == "torch.device":
        expr = expr.args[0] if len(expr.args) == 1 and not expr.keywords else expr
    return string_value(expr) == "cpu"


def moves_off_device(call: ast.Call, statement: ast.AST | None, imports: ImportTable) -> bool:
    """`y.to("cpu").numpy()`: a `.to("cpu")` whose result the statement reads on (a method or
    attribute of it) takes a value off the device, unlike `model(x.to("cpu"))` in a script
    whose device is the CPU; it stays as written."""
    args = call_args(call)
    target = next((a for a in args if a.plain or a.keyword == "device"), None)
    if not isinstance(call.func, ast.Attribute) or call.func.attr != "to" or target is None:
        return False
    if not is_cpu_device(target.value, imports) or statement is None:
        return False
    return any(isinstance(n, ast.Attribute) and n.value is call for n in ast.walk(statement))


def moves_to_cpu(call: ast.Call, imports: ImportTable) -> bool:
    """`x.to("cpu")`, `x.to(device=torch.device("cpu"))`, `x.to("cpu", non_blocking=True)`."""
    if not isinstance(call.func, ast.Attribute) or call.func.attr != "to":
        return False
    target = next((a for a in call_args(call) if a.plain or a.keyword == "device"), None)
    return target is not None and is_cpu_device(target.value, imports)


def is_accelerator_device(expr: ast.AST | None, accelerator_names: set[str]) -> bool:
    return (
        isinstance(expr, ast.Attribute)
        and expr.attr == "device"
        and name_of(expr.value) in accelerator_names
    )


def looks_like_device_name(name: str) -> bool:
    return name in ("device", "dev") or name.endswith("_device")


def is_devicey(expr: ast.AST, device_names: set[str], imports: ImportTable) -> bool:
    """Could `expr` be a device (as opposed to a dtype or a tensor) in `x.to(expr)`?"""
    name = name_value(expr)
    if name is not None:
        return name in device_names or looks_like_device_name(name)
    if isinstance(expr, ast.Attribute):
        if dotted_name(expr) in device_names:  # a Trainer's `self.gpu_id` holding the rank
            return True
        return expr.attr in ("device", "local_rank") or (  # args.local_rank (MIG010)
            expr.attr.endswith("_device") and dotted_name(expr) is not None
        )
    return is_device_constructor(expr, imports)


def _name_or_attribute(expr: ast.AST) -> bool:
    return isinstance(expr, ast.Attribute) or name_value(expr) is not None


def placement_call(call: ast.Call, device_names: set[str], imports: ImportTable) -> str | None:
    """ "to" for `x.to(device, ...)`, "cuda" for `x.cuda()`, None for anything else.

    `.to(torch.float16)` (a dtype) and `.cuda(1)` (an explicit index: a finding, not ours) are
    not placement calls.
    """
    if not isinstance(call.func, ast.Attribute):
        return None
    method = call.func.attr
    if method not in ("cuda", "to"):
        return None
    args = call_args(call)
    plain = [a for a in args if a.plain]
    device_kw = next((a for a in args if a.keyword == "device"), None)
    if method == "cuda":
        given = [*plain, *([device_kw] if device_kw is not None else [])]
        if given and not (  # `.cuda(local_rank)` names this process's device (MIG010)
            len(given) == 1 and _name_or_attribute(given[0].value)
            and is_devicey(given[0].value, device_names, imports)
        ):  # fmt: skip
            return None
        return "cuda"
    if plain and is_devicey(plain[0].value, device_names, imports):
        return "to"
    if device_kw is not None and is_devicey(device_kw.value, device_names, imports):
        return "to"
    return None


def has_explicit_index(expr: ast.AST) -> bool:
    value = string_value(expr)
    if isinstance(expr, ast.JoinedStr):  # f"cuda:{i}"
        value = "".join(p.value for p in expr.values if isinstance(p, ast.Constant))
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
PROGRESS_BARS = {*TQDM_CLASSES, "tqdm.trange", "tqdm.auto.trange", "trange",
                 "tqdm.notebook.trange", "tqdm.tnrange", "tqdm.notebook.tnrange"}  # fmt: skip
# tqdm's print beside the bars (a class method, through any spelling of the class)
BAR_PRINTS = {f"{name}.write" for name in TQDM_CLASSES} | {"tqdm.write"}
# shown to the user like a print: one window per process, unless on the main process only
FIGURE_SHOWS = {"matplotlib.pyplot.show"}
# calls that print by themselves (and return None or what they printed): `df.info()`,
# torchsummary's and torchinfo's `summary(model, ...)`
SELF_PRINTS = {"torchsummary.summary", "torchinfo.summary"}


def prints_itself(call: ast.Call, imports) -> bool:
    """`summary(model, (3, 32, 32))`, or `df.info()` (no positional argument: not a
    logger's `info(msg)`)."""
    if imports.qualify(call.func) in SELF_PRINTS:
        return True
    func = call.func
    return isinstance(func, ast.Attribute) and func.attr == "info" and not call.args and (
        not any(k.arg in ("msg", "exc_info") for k in call.keywords)
    )  # fmt: skip


DATA_PARALLEL = {"torch.nn.DataParallel", "torch.nn.parallel.DataParallel",
                 "torch.nn.parallel.data_parallel.DataParallel"}  # fmt: skip
HALF_DTYPES = {"torch.float16", "torch.half"}
BF16_DTYPES = {"torch.bfloat16"}


def autocast_precision(call: ast.Call, imports: ImportTable) -> tuple[str | None, bool] | None:
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


def is_cuda_available_call(expr: ast.AST, imports: ImportTable) -> bool:
    return (
        isinstance(expr, ast.Call)
        and not expr.args
        and not expr.keywords
        and (imports.qualify(expr.func) == "torch.cuda.is_available")
    )


def is_grad_scaler_call(call: ast.Call, imports: ImportTable) -> bool:
    return (imports.qualify(call.func) or "") in GRAD_SCALERS or is_scaler_call(call, imports)


# What a DistributedDataParallel wrapper answers itself (nn.Module's API), plus `module`,
# which MIG010 rewrites on its own.
MODULE_API = {
    "parameters", "named_parameters", "buffers", "named_buffers", "children", "named_children",
    "modules", "named_modules", "train", "eval", "training",
    "zero_grad", "to", "cuda", "cpu", "float", "half", "double", "bfloat16", "apply",
    "requires_grad_", "register_forward_hook", "register_forward_pre_hook",
    "register_full_backward_hook", "register_buffer", "register_parameter", "add_module",
    "forward", "type", "share_memory", "get_submodule", "get_parameter", "get_buffer",
    "module", "compile",
}  # fmt: skip
