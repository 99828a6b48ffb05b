"""Parameters a model's forward may leave unused (SPEC §3b.6).

DistributedDataParallel expects every parameter to get a gradient in every backward; one that
does not (a head the configured forward never calls, a branch taken only sometimes) makes the
second step fail ("Expected to have finished reduction in the prior iteration"), unless the
wrapper is made with `find_unused_parameters=True`. For a model whose class this program
defines, the submodules with parameters that `__init__` sets (`self.fc2 = nn.Linear(...)`,
`self.aux = Head()`, `self.w = nn.Parameter(...)`) are compared with what `forward` (and the
methods it calls on `self`) reads: one never read, or read only under an `if`, may be unused.
A forward that reads its modules by name (`getattr(self, ...)`, `self.children()`,
`self._modules`) is taken to use them all.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass

from migrator.analysis.model.calls import CallGraph
from migrator.analysis.model.origins import value_call
from migrator.analysis.syntax.imports import dotted_name
from migrator.analysis.syntax.index import Scope

# torch.nn modules without parameters: unused, they change nothing
PARAMETERLESS = {
    "ReLU", "GELU", "SiLU", "Tanh", "Sigmoid", "Softmax", "LogSoftmax", "Dropout", "Dropout2d",
    "Identity", "Flatten", "MaxPool1d", "MaxPool2d", "AvgPool2d", "AdaptiveAvgPool2d",
    "AdaptiveAvgPool1d", "LeakyReLU", "ELU", "Upsample", "MSELoss", "CrossEntropyLoss",
    "L1Loss", "BCELoss", "BCEWithLogitsLoss", "NLLLoss", "Softplus", "Hardswish", "Mish",
}  # fmt: skip
BY_NAME = {"getattr", "children", "named_children", "modules", "named_modules", "_modules"}
# torchvision's segmentation builders whose `aux_loss` (on with pretrained weights) adds a head
SEGMENTATION_BUILDERS = {
    "fcn_resnet50", "fcn_resnet101", "deeplabv3_resnet50", "deeplabv3_resnet101",
    "deeplabv3_mobilenet_v3_large",
}  # fmt: skip


@dataclass(frozen=True)
class UnusedParameters:
    model: str  # the model's name where it is made
    cls: str
    attributes: tuple[str, ...]  # `self.<attribute>` holding parameters forward may not use
    node: ast.AST  # the model's making, for findings
    why: str = "not read by its forward, or only under an `if`"


def unused_parameters(facts, graph: CallGraph) -> list[UnusedParameters]:
    found = []
    for name in facts.models:
        owner = facts.homes.get(name, facts.owner)
        auxiliary = _auxiliary_head(facts, owner, name) if owner is not None else None
        if auxiliary is not None:
            found.append(auxiliary)
            continue
        cls = _model_class(owner, name, graph) if owner is not None else None
        if cls is None:
            continue
        forward = graph.method(cls, "forward")
        init = graph.method(cls, "__init__")
        if forward is None or init is None:
            continue
        held = _parameter_attributes(init, graph)
        reads, conditional, by_name = _reads(forward, graph)
        if by_name:
            continue
        attributes = tuple(a for a in held if a not in reads or a in conditional)
        if attributes:
            binding = owner.assigns(name)[-1]
            found.append(UnusedParameters(name, cls.name, attributes, binding.statement.node))
    return found


def _auxiliary_head(facts, owner: Scope, name: str) -> UnusedParameters | None:
    """A torchvision segmentation model built with its auxiliary head (`fcn_resnet50(weights=
    "DEFAULT")` turns `aux_loss` on; `aux_loss=True`) whose output's `"aux"` the program never
    reads: the head computes in every forward, and no loss reaches its parameters (h8 house
    segmentation failed at step 2 on two processes)."""
    bindings = owner.assigns(name)
    calls = [value_call(b) for b in bindings]
    imports = facts.index.imports
    for call in calls:
        qualified = imports.qualify(call.func) if call is not None else None
        if not qualified or qualified.rsplit(".", 1)[-1] not in SEGMENTATION_BUILDERS:
            continue
        if not qualified.startswith("torchvision.models"):
            continue
        keywords = {k.arg: k.value for k in call.keywords}
        aux = keywords.get("aux_loss")
        weights = keywords.get("weights")
        on = (isinstance(aux, ast.Constant) and aux.value is True) or (
            aux is None
            and weights is not None
            and not (isinstance(weights, ast.Constant) and weights.value is None)
        )
        if on and not _reads_key(facts.index.tree, "aux"):
            turned = "`aux_loss=True`" if aux is not None else "the pretrained weights"
            return UnusedParameters(name, qualified, ("aux_classifier",), call, why=(
                f"the auxiliary head {turned} turns on, whose output `\"aux\"` nothing "
                "reads"))  # fmt: skip
    return None


def _reads_key(tree: ast.AST, key: str) -> bool:
    """`output["aux"]`, `outputs.get("aux")`: the program reads that key somewhere."""
    return any(isinstance(node, ast.Constant) and node.value == key for node in ast.walk(tree))


def _model_class(owner: Scope, name: str, graph: CallGraph) -> Scope | None:
    classes = set()
    for binding in owner.assigns(name):
        call = value_call(binding)
        called = dotted_name(call.func) if call is not None else None
        cls = graph.classes.get(graph.index.aliases.get(called, called)) if called else None
        if cls is None:
            return None
        classes.add(id(cls))
        found = cls
    return found if len(classes) == 1 else None


def _parameter_attributes(init: Scope, graph: CallGraph) -> list[str]:
    """`self.x = nn.Linear(...)` / a module class of the program / `nn.Parameter(...)`."""
    found = []
    for name, bindings in init.bindings.items():
        if not name.startswith("self."):
            continue
        for binding in bindings:
            call = value_call(binding)
            called = dotted_name(call.func) if call is not None else None
            if called is None:
                continue
            last = called.rsplit(".", 1)[-1]
            own_class = graph.classes.get(graph.index.aliases.get(called, called))
            qualified = graph.index.imports.qualify(call.func) or ""
            torch_module = qualified.startswith("torch.nn.") and last not in PARAMETERLESS
            if own_class is not None or torch_module:
                found.append(name.split(".", 1)[1])
                break
    return found


def _reads(forward: Scope, graph: CallGraph) -> tuple[set[str], set[str], bool]:
    """(attributes of `self` read, those read only under an `if`, whether modules are read
    by name) in `forward` and the methods of `self` it calls."""
    reads: set[str] = set()
    unconditional: set[str] = set()
    pending, seen = [forward], set()
    by_name = False
    while pending:
        method = pending.pop()
        if id(method) in seen:
            continue
        seen.add(id(method))
        for node, guarded in _walk(method.node):
            if isinstance(node, ast.Attribute) and dotted_name(node.value) == "self":
                if node.attr in BY_NAME:
                    by_name = True
                reads.add(node.attr)
                if not guarded:
                    unconditional.add(node.attr)
            if isinstance(node, ast.Call) and dotted_name(node.func) == "getattr":
                by_name = True
        for site in method.calls:
            callee = graph.callee(site)
            if callee is not None and callee.parent is method.parent:
                pending.append(callee)
    return reads, reads - unconditional, by_name


def _walk(node: ast.AST, guarded: bool = False):
    """Every node under `node` (not nested functions), and whether an `if` or a conditional
    expression holds it."""
    for child in ast.iter_child_nodes(node):
        if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)):
            continue
        inner = guarded
        if isinstance(node, (ast.If, ast.IfExp)) and child is not node.test:
            inner = True
        yield child, inner
        yield from _walk(child, inner)
