"""MIG004 on programs that computed on the CPU alone (nothing placed anywhere). `prepare` puts
the model, and a prepared loader its batches, on `accelerator.device` (a GPU where there is
one); the program's other tensors were on the one device the model was on, and must follow it:

- `t.numpy()` in training code reads a host copy, `t.cpu().numpy()` (`.cpu()` of a host
  tensor is the tensor itself: nothing changes on the CPU);
- a tensor the program builds itself in a function that runs the prepared model
  (`X_test = torch.tensor(...)`, `torch.from_numpy(a).float()`, indexed or reshaped) goes to
  the model's device where it is made, `X_test = torch.tensor(...).to(accelerator.device)`,
  when it is handed to the model or meets what the model returned (`criterion(out, y_test)`,
  `pred == y_test`); a factory call handed to the model directly is placed in the call;
- such a placed tensor read by a host library (`accuracy_score(y_test, pred)`, `np.mean`,
  `plt.plot`) is read as a host copy, `y_test.cpu()`.
Where a tensor the model meets cannot be followed (a function's parameter, an attribute, a
tensor made inside `forward` or handed to a loss's constructor), nothing is placed: the
Accelerator keeps the program on the CPU (`cpu=True`), where it ran, with a note saying how to
move it to the GPUs. A program that places anything itself says where its tensors are (MIG002,
the rest of MIG004).
"""

from __future__ import annotations

import ast
from dataclasses import replace

from migrator.analysis.catalogue import patterns
from migrator.analysis.model.dataflow import data_root
from migrator.analysis.model.host_batches import COLLECTING, HOST_LIBRARIES
from migrator.analysis.placement.loaderless import KEPT_ON_THE_CPU, ON_THE_CPU, PLACED_WHERE_MADE
from migrator.analysis.syntax.index import CallSite, Scope
from migrator.findings import Finding
from migrator.rules.base import RuleContext
from migrator.rules.running_sums import scope_nodes

# torch's functions that make a new tensor on the CPU unless told otherwise
HOST_FACTORIES = frozenset({
    "tensor", "as_tensor", "from_numpy", "Tensor", "FloatTensor", "DoubleTensor", "LongTensor",
    "IntTensor", "BoolTensor", "HalfTensor", "randn", "rand", "randint", "zeros", "ones", "full",
    "arange", "linspace", "empty", "eye",
})  # fmt: skip
HOST_COPIES = frozenset({"cpu", "numpy", "tolist", "item"})
MAX_DEPTH = 4


def place_host_values(context: RuleContext) -> None:
    facts = context.facts
    forwards = [site for site in facts.index.calls() if _prepared_model(context, site)]
    if not forwards:
        return
    placed = False
    scopes = {id(s): s for s in facts.training_scopes}
    scopes.update((id(site.scope), site.scope) for site in forwards)
    by_scope: dict[int, list[CallSite]] = {}
    for site in forwards:
        by_scope.setdefault(id(site.scope), []).append(site)
    tensors = [_HostTensors(context, sites) for sites in by_scope.values()]
    unfollowed = [node for t in tensors for node in t.unfollowed()] + _made_in_modules(context)
    if unfollowed:
        _keep_on_the_cpu(context, unfollowed[0])
        return
    for scope in scopes.values():
        for site in scope.calls:
            if site.method == "numpy" and not site.node.args and site.receiver is not None:
                _read_on_host(context, site.receiver)
    for host in tensors:
        placed = host.place() or placed
        host.collect_on_host(_host_read_lists(context))
    if placed:
        _say_in_the_loop_note(context, ON_THE_CPU, PLACED_WHERE_MADE)


def _keep_on_the_cpu(context: RuleContext, node: ast.AST) -> None:
    context.add_kwarg("cpu", "True")
    context.findings.append(Finding(code="MIG004", level="note", node=node, message=(
        f"the original computes on the CPU alone, and `{context.source.text_of(node).strip()}` "
        f"(line {node.lineno}), which meets the model there, is neither a prepared loader's "
        "batch nor a tensor this tool can follow to `accelerator.device`: the Accelerator "
        "keeps the program on the CPU, where it ran (`cpu=True`, N processes there); to "
        "train on GPUs, put what the model meets on `accelerator.device` and drop "
        "`cpu=True`")))  # fmt: skip
    _say_in_the_loop_note(context, ON_THE_CPU, KEPT_ON_THE_CPU)


def _say_in_the_loop_note(context: RuleContext, said: str, instead: str) -> None:
    """The loaderless loop's MIG905 note (made before the rules) says where the tensors are."""
    if context.plan is None:
        return
    context.plan.notes = [
        replace(note, message=note.message.replace(said, instead))
        if note.code == "MIG905" else note
        for note in context.plan.notes
    ]  # fmt: skip


def _made_in_modules(context: RuleContext) -> list[ast.AST]:
    """Tensors made on the host by the program's modules (`h0 = torch.zeros(...)` in a
    `forward`) or handed to a module's constructor (`CrossEntropyLoss(weight=torch.tensor(w))`):
    they meet the model's inputs on its device, where this tool does not follow them."""
    index = context.facts.index
    imports = index.imports
    found: list[ast.AST] = []
    for scope in index.scopes:
        if scope.kind == "class" and _module_class(scope, imports):
            for node in ast.walk(scope.node):
                if isinstance(node, ast.Call) and _host_factory(node, imports):
                    found.append(node)
    for site in index.calls():
        qualified = imports.qualify(site.node.func) or ""
        if not qualified.startswith("torch.nn.") or qualified.startswith("torch.nn.functional"):
            continue
        for argument in [*site.node.args, *(k.value for k in site.node.keywords)]:
            if _host_factory(_strip(argument), imports) or _bound_to_factory(
                site.scope, argument, imports
            ):
                found.append(argument)
    return found


def _module_class(cls: Scope, imports) -> bool:
    return any((imports.qualify(base) or "").startswith("torch.nn.") for base in cls.node.bases)


def _host_factory(node: ast.AST, imports) -> bool:
    if not isinstance(node, ast.Call):
        return False
    qualified = imports.qualify(node.func) or ""
    module, _, function = qualified.rpartition(".")
    given = any(keyword.arg == "device" for keyword in node.keywords)
    return module == "torch" and function in HOST_FACTORIES and not given


def _bound_to_factory(scope: Scope, argument: ast.expr, imports) -> bool:
    name = patterns.name_of(_strip(argument))
    if name is None or "." in name:
        return False
    return any(
        b.value is not None and _host_factory(_strip(b.value), imports)
        for b in scope.bindings.get(name, [])
    )


def _prepared_model(context: RuleContext, site: CallSite) -> bool:
    """A call of the prepared model: `model(x)`, or `model.forward(x)`."""
    func = site.node.func
    if isinstance(func, ast.Attribute) and func.attr == "forward":
        func = func.value
    name = patterns.name_of(func)
    return name is not None and context.prepared_role(site.scope, name) == "model"


def _host_read_lists(context: RuleContext) -> set[str]:
    """Names a host library reads anywhere in the program, whole or sliced (`np.mean(
    losses[-100:])`, `plt.plot(steps, losses)`): lists the program collects values in."""
    imports = context.facts.index.imports
    read: set[str] = set()
    for site in context.facts.index.calls():
        qualified = imports.qualify(site.node.func) or ""
        if not qualified.startswith(HOST_LIBRARIES):
            continue
        for argument in [*site.node.args, *(k.value for k in site.node.keywords)]:
            while isinstance(argument, ast.Subscript):
                argument = argument.value
            if isinstance(argument, ast.Name):
                read.add(argument.id)
    return read


def _read_on_host(context: RuleContext, receiver: ast.expr) -> None:
    copied = (
        isinstance(receiver, ast.Call)
        and isinstance(receiver.func, ast.Attribute)
        and (
            receiver.func.attr in HOST_COPIES
            or patterns.moves_to_cpu(receiver, context.facts.index.imports)
        )
    )
    if copied:
        return  # `t.cpu().numpy()`, `t.to("cpu").numpy()`: already a host copy
    if not context.edits.has_replacement(receiver):
        atomic = isinstance(receiver, (ast.Name, ast.Attribute, ast.Call, ast.Subscript))
        context.edits.replace(
            receiver, lambda text, _r: f"{text}.cpu()" if atomic else f"({text}).cpu()"
        )


class _HostTensors:
    """The tensors one function builds on the host and uses with the prepared model."""

    def __init__(self, context: RuleContext, forwards: list[CallSite]) -> None:
        self.context = context
        self.forwards = forwards
        self.scope: Scope = forwards[0].scope
        self.imports = context.facts.index.imports
        self.device = context.accelerator_expr("device")

    def unfollowed(self) -> list[ast.AST]:
        """What the model is handed here that is neither a prepared loader's batch nor a
        tensor built on the host in this function (a parameter, an attribute, a dataset's
        item), plus the host tensors `_meeting_outputs` cannot see: none, or the program
        stays on the CPU."""
        found = []
        outputs = self._outputs()
        for site in self.forwards:
            for argument in [*site.node.args, *(k.value for k in site.node.keywords)]:
                if isinstance(argument, ast.Constant) or self._from_loader(site, argument):
                    continue
                if self._reads(argument, outputs):
                    continue  # `head(encoder(x))`, `disc(fake.detach())`: on the model's device
                if self._host_name(argument) is None and not self._built_on_host(argument, 0):
                    found.append(argument)
        return found

    def place(self) -> bool:
        """Place what this function builds on the host for the model; whether anything was."""
        placed: set[str] = set()
        inline = False
        for site in self.forwards:
            for argument in [*site.node.args, *(k.value for k in site.node.keywords)]:
                if self._from_loader(site, argument):
                    continue
                name = self._host_name(argument)
                if name is not None:
                    placed.add(name)
                elif self._built_on_host(argument, 0):  # `model(torch.tensor(x))`
                    self._to_device(argument)
                    self.context.need_accelerator_at(site.statement)
                    inline = True
        placed |= self._meeting_outputs()
        for operand, statement in self._inline_meeting_outputs():  # `criterion(out, tensor(y))`
            self._to_device(operand)
            self.context.need_accelerator_at(statement)
            inline = True
        for name in sorted(placed):
            for binding in self.scope.bindings.get(name, []):
                self._to_device(binding.value)
                self.context.need_accelerator_at(binding.statement)
            self._host_reads(name)
        return inline or bool(placed)

    def collect_on_host(self, host_lists: set[str]) -> None:
        """`losses.append(loss)` of what the model returned (or a value made from it on the
        device), into a list a host library reads (`np.mean(losses)`): the list keeps host
        copies, `losses.append(loss.cpu())`, as the original's were (on the CPU, `.cpu()` is
        the tensor itself)."""
        outputs = self._outputs()
        for site in self.scope.calls:
            receiver = site.receiver
            if site.method not in COLLECTING or not isinstance(receiver, ast.Name):
                continue
            if receiver.id not in host_lists or len(site.node.args) != 1:
                continue
            value = site.node.args[0]
            if site.method == "append" and self._reads(value, outputs):
                _read_on_host(self.context, value)

    def _to_device(self, node: ast.expr) -> None:
        if not self.context.edits.has_replacement(node):
            self.context.edits.replace(node, lambda text, _r, d=self.device: f"{text}.to({d})")

    def _from_loader(self, site: CallSite, argument: ast.expr) -> bool:
        return any(
            region.contains(site) and data_root(argument, region.names) is not None
            for region in self.context.facts.regions
        )

    def _host_name(self, expr: ast.expr) -> str | None:
        """The local name `expr` reads through indexing and reshaping, when every binding of
        it is a tensor built on the host."""
        expr = _strip(expr)
        name = patterns.name_of(expr)
        if name is None or "." in name or not self.scope.is_local(name):
            return None
        return name if self._built_on_host(expr, 0) else None

    def _built_on_host(self, expr: ast.expr, depth: int) -> bool:
        expr = _strip(expr)
        if isinstance(expr, ast.Call):
            return _host_factory(expr, self.imports)
        name = patterns.name_of(expr)
        if name is None or "." in name or depth > MAX_DEPTH or not self.scope.is_local(name):
            return False
        bindings = self.scope.bindings.get(name, [])
        return bool(bindings) and all(
            b.kind == "assign" and not b.unpacked and b.value is not None
            and self._built_on_host(b.value, depth + 1)
            for b in bindings
        )  # fmt: skip

    def _meeting_outputs(self) -> set[str]:
        """Host-built names that meet the model's output (or a value made from it) in one
        torch operation: an argument beside it (`criterion(out, y_test)`), an operand of the
        same arithmetic or comparison (`pred == y_test`)."""
        outputs = self._outputs()
        met: set[str] = set()
        for node in scope_nodes(self.scope.node):
            if isinstance(node, ast.Call):
                qualified = self.imports.qualify(node.func) or ""
                if qualified.startswith(HOST_LIBRARIES):
                    continue
                operands = [*node.args, *(k.value for k in node.keywords)]
            elif isinstance(node, ast.BinOp):
                operands = [node.left, node.right]
            elif isinstance(node, ast.Compare):
                operands = [node.left, *node.comparators]
            else:
                continue
            if not any(self._reads(operand, outputs) for operand in operands):
                continue
            for operand in operands:
                name = self._host_name(operand)
                if name is not None:
                    met.add(name)
        return met

    def _inline_meeting_outputs(self) -> list:
        """(operand, its statement) for a tensor built on the host in place, handed to a
        torch call beside the model's output (`criterion(out.squeeze(),
        torch.tensor(y.values).float())`)."""
        outputs = self._outputs()
        found = []
        for site in self.scope.calls:
            qualified = self.imports.qualify(site.node.func) or ""
            if qualified.startswith(HOST_LIBRARIES) or id(site.node) in {
                id(f.node) for f in self.forwards
            }:  # fmt: skip
                continue
            operands = [*site.node.args, *(k.value for k in site.node.keywords)]
            if not any(self._reads(operand, outputs) for operand in operands):
                continue
            for operand in operands:
                if isinstance(_strip(operand), ast.Call) and self._built_on_host(operand, 0):
                    found.append((operand, site.statement))
        return found

    def _outputs(self) -> set[str]:
        """Names bound to what the model returned, or to values computed from them on the
        device (not through a host copy)."""
        calls = {id(site.node) for site in self.forwards}
        outputs: set[str] = set()
        changed = True
        while changed:
            changed = False
            for name, bindings in self.scope.bindings.items():
                if name in outputs:
                    continue
                if any(b.value is not None and (
                    any(id(n) in calls for n in ast.walk(b.value)) or self._reads(b.value, outputs)
                ) for b in bindings):  # fmt: skip
                    outputs.add(name)
                    changed = True
        return outputs

    def _reads(self, expr: ast.expr, names: set[str]) -> bool:
        calls = {id(site.node) for site in self.forwards}
        for node in ast.walk(expr):
            if _method(node) in HOST_COPIES:
                return False  # `out.argmax(1).cpu()`: a host value from here on
            if id(node) in calls or (isinstance(node, ast.Name) and node.id in names):
                return True
        return False

    def _host_reads(self, name: str) -> None:
        """`accuracy_score(y_test, pred)`, `np.mean(y_test)`: a host library reads it."""
        for node in scope_nodes(self.scope.node):
            if not isinstance(node, ast.Call):
                continue
            qualified = self.imports.qualify(node.func) or ""
            if not qualified.startswith(HOST_LIBRARIES):
                continue
            for argument in [*node.args, *(k.value for k in node.keywords)]:
                if isinstance(argument, ast.Name) and argument.id == name:
                    _read_on_host(self.context, argument)


def _method(node: ast.AST) -> str | None:
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
        return node.func.attr
    return None


def _strip(expr: ast.expr) -> ast.expr:
    """`x[:10]`, `x.float().unsqueeze(0)`: the tensor they are taken from."""
    while True:
        if isinstance(expr, ast.Subscript):
            expr = expr.value
        elif (
            isinstance(expr, ast.Call)
            and isinstance(expr.func, ast.Attribute)
            and expr.func.attr in patterns.DEVICE_PRESERVING_METHODS - {"to", "cuda"}
        ):
            expr = expr.func.value
        else:
            return expr
