"""Which `x.device` reads are a device the script chose, and which are where a tensor is.

`device = args.device`, `dev = cfg["device"]`, `device = choose_device(...)`: a setting, which
becomes `accelerator.device`. `device = mu.device` in a function that does arithmetic with
`mu` is where that tensor already lives (on N processes, this process's device): it stays as
written, and so do the placements that read it (SPEC §3b.5: a device read from a tensor is
never a device setting).
"""

from __future__ import annotations

import ast

from migrator.analysis.catalogue import patterns
from migrator.analysis.syntax.imports import ImportTable, dotted_name
from migrator.analysis.syntax.index import Scope

# methods and attributes only tensors answer (not `.to`, `.float()`, `.cuda()`: models do too)
TENSOR_ATTRIBUTES = frozenset({
    "shape", "size", "dtype", "dim", "ndim", "numel", "view", "reshape", "detach", "item",
    "unsqueeze", "squeeze", "permute", "transpose", "contiguous", "clone", "numpy", "tolist",
    "flatten", "expand", "expand_as", "repeat", "masked_fill", "new_zeros", "new_ones",
    "new_tensor", "new_empty", "is_cuda", "requires_grad_", "grad", "T", "mT",
})  # fmt: skip
ARITHMETIC = (ast.BinOp, ast.UnaryOp)


def chosen_device(name: str, value: ast.expr, binding, is_tensor_device) -> bool:
    """`device = choose_device(args.device)`, `device = args.device`, `dev = cfg["device"]`,
    `device = next(model.parameters()).device`: a variable named as the device, set once
    outside a loop from a helper, a flag or a config that names a device too. Not
    `cpu_device = ...` (a host device for copies, which stays), nor `device = config.cuda`
    (a switch, not a device), nor `device = mu.device` (`is_tensor_device(value)`: where a
    tensor is)."""
    if not patterns.looks_like_device_name(name) or "cpu" in name.lower() or binding.loop:
        return False
    if is_tensor_device(value):
        return False
    if isinstance(value, ast.Call):
        named = patterns.last_part(dotted_name(value.func) or "")
    elif isinstance(value, ast.Attribute):
        named = value.attr
    elif isinstance(value, ast.Subscript):
        named = patterns.string_value(value.slice) or ""
    else:
        return False
    return "device" in named.lower()


def read_from_tensor(scope: Scope, value: ast.expr, imports: ImportTable, is_model) -> bool:
    """Is `value` `<name>.device` of a tensor: a name `scope` computes with (arithmetic,
    a tensor's own method, an argument of a torch function) or binds from a torch call, and
    not a model (`is_model(name)`)?"""
    if not (isinstance(value, ast.Attribute) and value.attr == "device"):
        return False
    receiver = value.value
    if not isinstance(receiver, ast.Name) or is_model(receiver.id):
        return False
    name = receiver.id
    if any(_made_by_torch(b.value, imports) for b in scope.assigns(name) if not b.unpacked):
        return True
    return any(_computed_with(node, name, imports) for node in ast.walk(scope.node))


def _made_by_torch(value: ast.expr | None, imports: ImportTable) -> bool:
    if not isinstance(value, ast.Call):
        return False
    qualified = imports.qualify(value.func) or ""
    return qualified.startswith("torch.") and qualified != "torch.device"


def _computed_with(node: ast.AST, name: str, imports: ImportTable) -> bool:
    """Does `node` use `name` as a tensor?"""
    if isinstance(node, ast.BinOp):
        return _is_name(node.left, name) or _is_name(node.right, name)
    if isinstance(node, ast.UnaryOp):
        return _is_name(node.operand, name)
    if isinstance(node, ast.Attribute) and _is_name(node.value, name):
        return node.attr in TENSOR_ATTRIBUTES
    if isinstance(node, ast.Call) and any(_is_name(a, name) for a in node.args):
        qualified = imports.qualify(node.func) or ""
        return qualified.startswith("torch.") and not qualified.startswith(
            ("torch.device", "torch.save")
        )
    return False


def _is_name(node: ast.AST, name: str) -> bool:
    return isinstance(node, ast.Name) and node.id == name
