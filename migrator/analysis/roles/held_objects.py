"""Models held on other objects (issue 16 item 3): a Trainer that keeps the config it receives
(`self.training_config = training_config`) and trains `self.training_config.model(xb)` with
`self.training_config.optimiser`, or a `train(cfg, loader)` running `cfg.model(x)`.

The chain is the model's name (chains.py): the loop runs it, and the script places it on a
device or switches it to train mode (`self.training_config.model.to(self.device)`,
`cfg = self.training_config; cfg.model.train()`), so it is the model an optimizer built
elsewhere trains (trained_models.py), prepared where its holder is bound. A holder whose
class is frozen (a frozen dataclass, a NamedTuple) cannot take the prepared object back: MIG900.

A mixin of roles._Analyser, kept in its own module for size.
"""

from __future__ import annotations

import ast
import re

from migrator.analysis.catalogue import patterns
from migrator.analysis.model.chains import chain_text, split_chain
from migrator.analysis.model.forwards import forwarded
from migrator.analysis.model.origins import Origin, value_call
from migrator.analysis.roles.facts import TrainingFacts
from migrator.analysis.roles.trained_models import (
    PLACING,
)  # calls that show a chain holds the model
from migrator.analysis.syntax.index import CallSite, ModuleIndex


class HeldObjects:
    facts: TrainingFacts
    index: ModuleIndex
    imports: object

    def _held_call(self, call: CallSite) -> str | None:
        """`self.cfg.model` for `self.cfg.model(x)` / `self.cfg.model.forward(x)`: the chain a
        call in the loop runs, when its root is no imported module (`nn.functional.relu`)."""
        func = forwarded(call.node.func)
        chain = chain_text(func)
        if chain is None or split_chain(chain) is None:
            return None
        root = chain.split(".")[0].split("[")[0]
        return None if self.imports.imported(root) else chain

    def _held_loader(self, expr: ast.expr) -> str | None:
        """`self.cfg.train_loader` iterated by a loop: a loader held on an object, when its
        root is no imported module."""
        chain = chain_text(expr)
        if chain is None or split_chain(chain) is None:
            return None
        return None if self.imports.imported(re.split(r"[.\[]", chain)[0]) else chain

    def _held_placed(self, origin: Origin) -> bool:
        """The chain `origin` names is placed on a device, switched to train mode or read for
        its parameters somewhere in the file (`self.training_config.model.to(self.device)`)."""
        if split_chain(origin.name) is None:
            return False
        for site in self.index.calls():
            if site.method not in PLACING or chain_text(site.receiver) is None:
                continue
            if self.facts.chain_origin(site.scope, site.receiver) == origin:
                return True
        return False

    def _held_model(self, found: Origin, call: ast.Call, forwards: list[Origin]) -> str | None:
        """`self.cfg.model` for an optimizer built on `self.cfg.model.parameters()` when the
        loop runs `self.cfg.model(x)`: the model is that chain, not its holder `self.cfg`."""
        held = []
        for node in ast.walk(call):
            if not (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr in ("parameters", "named_parameters")
            ):
                continue
            fed = chain_text(node.func.value)  # `self.cfg.model.encoder` feeds its model's
            for origin in forwards:
                prefix = fed is not None and fed.startswith(origin.name)
                if (
                    prefix
                    and origin.scope is found.scope
                    and origin.name[len(found.name) : len(found.name) + 1] in (".", "[")
                    and fed[len(origin.name) : len(origin.name) + 1] in ("", ".", "[")
                    and origin.name.startswith(found.name)
                ):
                    held.append(origin.name)
        return max(held, key=len) if held else None

    def _frozen_holders(self) -> None:
        """MIG900 when a prepared object is held on an instance of a frozen dataclass or a
        NamedTuple of this file (`cfg: Config` with `@dataclass(frozen=True)`): prepare
        cannot store the prepared object back on it."""
        facts = self.facts
        for name in [*facts.models, *facts.optimizers, *facts.train_loaders]:
            parts = split_chain(name)
            if parts is None or not FIELD.fullmatch(parts[1]):
                continue
            home = facts.homes.get(name, facts.owner)
            holder_class = self._holder_class(home, parts[0])
            why = _immutable(holder_class, self.imports) if holder_class is not None else None
            if why is None:
                continue
            self._finding(facts.training_loops[0].node, "MIG900",
                          f"`{name}` is held on `{parts[0]}`, an instance of `{holder_class.name}` "
                          f"(line {holder_class.lineno}), {why}: `accelerator.prepare` cannot "
                          f"store the prepared object back on it; keep the object on its own "
                          f"name (`{_own_name(name)} = {name}`) and train that, then migrate")  # fmt: skip
            return

    def _holder_class(self, scope, holder: str) -> ast.ClassDef | None:
        """The class of this file a holder is an instance of: its parameter's annotation
        (`cfg: Config`, also through `self.cfg = cfg`), or the call that builds it."""
        bindings = scope.assigns(holder)
        if len(bindings) == 1 and isinstance(bindings[0].value, ast.Name):
            holder = bindings[0].value.id  # `self.cfg = cfg`: the parameter's annotation
        annotation = None
        arguments = getattr(scope.node, "args", None)
        if holder in scope.params and arguments is not None:
            every = [*arguments.posonlyargs, *arguments.args, *arguments.kwonlyargs]
            annotation = next((a.annotation for a in every if a.arg == holder), None)
        elif len(bindings) == 1 and (call := value_call(bindings[0])) is not None:
            annotation = call.func
        class_name = patterns.name_of(annotation)
        if class_name is None:
            return None
        for node in self.index.tree.body:
            if isinstance(node, ast.ClassDef) and node.name == class_name:
                return node
        return None


# `.model`, `["model"]`: one field of the holder (not `.train.optimizer`)
FIELD = re.compile(r"\.\w+|\[[^\]]+\]")


def _own_name(chain: str) -> str:
    """`self.model` for `self.cfg.model`, `optimizer` for `cfg["optimizer"]`."""
    field = re.sub(r"\W", "", re.split(r"[.\[]", chain)[-1]) or "obj"
    return f"{patterns.SELF}.{field}" if chain.startswith(patterns.SELF + ".") else field


def _immutable(node: ast.ClassDef, imports) -> str | None:
    """Why instances of `node` cannot take a new attribute value, or None."""
    for base in node.bases:
        qualified = imports.qualify(base.func if isinstance(base, ast.Call) else base) or ""
        if patterns.last_part(qualified) in ("NamedTuple", "namedtuple"):
            return "a NamedTuple"
    for decorator in node.decorator_list:
        target = decorator.func if isinstance(decorator, ast.Call) else decorator
        qualified = patterns.last_part(imports.qualify(target) or "")
        if qualified == "frozen":  # `@attrs.frozen`
            return "a frozen attrs class"
        keywords = decorator.keywords if isinstance(decorator, ast.Call) else []
        if any(
            k.arg == "frozen" and isinstance(k.value, ast.Constant) and k.value.value is True
            for k in keywords
        ):
            return f"a frozen {'dataclass' if qualified == 'dataclass' else 'class'}"
    return None
