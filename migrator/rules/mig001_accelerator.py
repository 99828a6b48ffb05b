"""MIG001 accelerator: `from runtime import Accelerator` (or `accelerate` with --target
accelerate) and one `accelerator = Accelerator(...)` where every rewritten line can see it.

- Only the function that owns training uses it: its first statement.
- Several functions (or module code) use it: module level, after the imports; as the first
  statement of `if __name__ == "__main__":` when everything that uses it runs from there.
- Its arguments (`mixed_precision=`, `gradient_accumulation_steps=`) read names the owner
  defines (`args`): it is created right after them, inside the owner, declared `global` when
  other functions use it.
Rewrites that would run before it exists are dropped when they are optional (a `print`), and
stop the migration (a finding) when they are not.
"""

from __future__ import annotations

import ast
from functools import partial

from migrator.analysis.model.origins import call_sites_of, class_methods, is_method
from migrator.analysis.roles.explain import where
from migrator.analysis.syntax.index import Block, Line, Scope
from migrator.analysis.syntax.points import after_imports, is_docstring, is_import
from migrator.findings import Finding
from migrator.rules.accelerator_guard import guard_point, main_guard_point
from migrator.rules.accelerator_needs import (
    callers_arguments,
    definitions,
    late_arguments,
    need_line,
    need_words,
    position_in,
    read_parameters,
)
from migrator.rules.base import Rule, RuleContext
from migrator.rules.mig006_prepare import LINE_LENGTH


class CreateAccelerator(Rule):
    code = "MIG001"
    name = "accelerator"
    summary = "import Accelerator and create `accelerator = Accelerator()` where training lives"
    triggers = ("backward",)

    def apply(self, context: RuleContext) -> None:
        blocked, count = context.blocked, len(context.findings)
        needs = list(context.needs)
        kwargs = [(k, k.code, k.depends_on) for k in context.kwargs]
        self._later: list = []  # edits the placement asks for, made once it is found
        self._create(context)
        optional = [k for k in context.kwargs if k.unless_placed is not None]
        if context.blocked and not blocked and optional and not context.accelerator_created:
            # an argument it can go without (`cpu=`) asks for a place it cannot have: it goes,
            # with its note, rather than the whole migration
            del context.findings[count:]
            context.blocked = False
            context.needs[:] = needs
            for kwarg, code, depends in kwargs:
                kwarg.code, kwarg.depends_on = code, depends
            for kwarg in optional:
                context.kwargs.remove(kwarg)
                context.findings.append(kwarg.unless_placed)
            self._later = []
            self._create(context)

    def _create(self, context: RuleContext) -> None:
        facts = context.facts
        if facts.accelerator_names or not context.needs:
            return
        owner = facts.owner
        module = facts.index.module_scope
        in_owner = (
            owner is not None
            and owner.kind == "function"
            and all(need.scope.within(owner) for need in context.needs)
        )
        at_module = any(need.scope is module for need in context.needs)
        dependencies = {name for kwarg in context.kwargs for name in kwarg.depends_on}
        owner_defines = (
            owner is not None
            and owner.kind == "function"
            and any(owner.is_local(name) or name in owner.params for name in dependencies)
        )
        if owner_defines and at_module and callers_arguments(context, owner):
            dependencies = {name for kwarg in context.kwargs for name in kwarg.depends_on}
            owner_defines = False
        declare_global = False
        if is_method(owner):
            # `self.accelerator`: made in __init__, seen by every method of the class.
            methods = class_methods(owner)
            outside = [n for n in context.needs if not any(n.scope.within(m) for m in methods)]
            for need in outside:
                if need.fallback is not None:  # the process-wide state's flag instead
                    self._later.append(need.fallback)
                elif need.soft is not None:  # prints stay prints
                    self._later.append(partial(context.edits.cancel, need.soft))
                else:
                    continue
                context.needs.remove(need)
            outside = [n for n in outside if n in context.needs]
            if outside:
                need = min(outside, key=need_line)
                place = (
                    "in the class body (run when the class is defined, before any instance)"
                    if need.scope is owner.parent
                    else "outside the class"
                )
                context.block_file(Finding(code="MIG900", node=owner.node, message=(
                    f"the Accelerator belongs to the Trainer (`{context.accelerator}`, made "
                    f"in `{owner.parent.name}.__init__()`), but {need_words(context, need)}, "
                    f"{place}, needs it too; migrate by hand")))  # fmt: skip
                return
            scope = self._class_scope(context, owner, dependencies)
            if scope is None:
                return
        elif in_owner or (owner_defines and not at_module):
            scope, declare_global = owner, not in_owner
            if declare_global and not self._used_after_creation(context, owner):
                return
        elif owner_defines:  # module code prepares too (function_homes.py)
            local = [
                f"`{d}`" for d in sorted(dependencies) if owner.is_local(d) or d in owner.params
            ]
            context.block_file(Finding(
                code="MIG900", node=owner.node,
                message="the Accelerator must be created at module level, where training "
                f"objects are prepared, but its arguments read {', '.join(local)}, made "
                f"{where(owner)}; migrate by hand",
            ))  # fmt: skip
            return
        else:
            scope = module
        block = scope.body
        start = _body_start(block) if scope is not module else None
        if read_parameters(context, block):
            dependencies = {name for kwarg in context.kwargs for name in kwarg.depends_on}
        index = self._creation_index(block, dependencies, start, _first_need(context, block))
        indent = 0 if scope is module else 4
        guarded = None
        if scope is module and self._hard_need_before(context, block, index):
            guarded = guard_point(context, block, dependencies)  # in `if __name__ == ...:`
        elif scope is module:
            guarded = main_guard_point(context, block, index)
        if guarded is not None:
            block, index, moved = guarded
            indent = 4 * len(block.parent.chain())
            self._move_devices(context, block, index, module.body, moved)
        if not self._settle_needs(context, block, index):
            return
        for effect in self._later:  # the place is found: what finding it asked for is done
            effect()
        self._later = []
        values = _values(context.kwargs)
        arguments = ", ".join(f"{name}={code}" for name, code in values)
        code = f"{context.accelerator} = Accelerator({arguments})\n"
        if indent + len(code) > LINE_LENGTH:
            lines = "".join(f"    {name}={code},\n" for name, code in values)
            code = f"{context.accelerator} = Accelerator(\n{lines})\n"
        blank = scope is module and index > 0 and guarded is None
        context.edits.insert(block.holder, index, context.statement(code, blank), priority=0)
        if declare_global:
            statement = context.statement(f"global {context.accelerator}\n")
            context.edits.insert(block.holder, _body_start(block), statement, priority=-1)
        self._import(context, module.body)
        context.accelerator_created = True

    @staticmethod
    def _class_scope(context: RuleContext, owner: Scope, dependencies: set[str]) -> Scope | None:
        """The method that creates `self.accelerator`: the owner, or `__init__` when the
        class prepares objects in several methods (homes.py): it runs before any of them."""
        homes = {id(home): home for name, home in context.facts.homes.items()
                 if context.plan.prepares(name)}  # fmt: skip
        init = next((m for m in class_methods(owner) if m.name == "__init__"), None)
        in_init = (
            init is not None
            and init is not owner
            and any(need.scope.within(init) for need in context.needs)
        )  # `self.device = self.accelerator.device` in `__init__`
        if not in_init and all(home is owner for home in homes.values()):
            return owner
        elsewhere = [d for d in dependencies for m in class_methods(owner)
                     if m is not init and (m.is_local(d) or d in m.params)]  # fmt: skip
        if init is not None and not elsewhere:
            return init
        used = [m for m in class_methods(owner) if any(n.scope.within(m) for n in context.needs)]
        methods = ", ".join(f"`{m.name}()`" for m in used)
        why = ("the class has no __init__ to create it in" if init is None else
               f"its arguments read {', '.join(sorted(set(elsewhere)))}, not known in __init__")  # fmt: skip
        context.block_file(Finding(
            code="MIG900", node=owner.node,
            message=f"the Trainer uses the Accelerator in several methods ({methods}), so it "
            f"must be created in __init__, before any of them runs, but {why}; migrate by hand",
        ))  # fmt: skip
        return None

    def _used_after_creation(self, context: RuleContext, owner: Scope) -> bool:
        """A global accelerator made in the owner (its arguments read the owner's values)
        exists once the owner runs: a function of the file that uses it and is called from
        outside the owner, not after a call of the owner there (`setup(args)` from `main()`
        before `train(args)`), would meet no accelerator. A MIG900 naming it; False if so."""
        index = context.facts.index
        for need in list(context.needs):
            scope = need.scope
            while scope is not None and scope.kind != "function":
                scope = scope.parent
            if scope is None or scope.within(owner) or owner.within(scope):
                continue
            made = call_sites_of(index, owner)
            if need.fallback is not None and any(not c.scope.within(owner) for c in
                                                 call_sites_of(index, scope)):  # fmt: skip
                self._later.append(need.fallback)  # the process-wide state's flag: it exists
                context.needs.remove(need)  # wherever it runs
                continue
            outside = [c for c in call_sites_of(index, scope) if not c.scope.within(owner)
                       and not any(m.scope is c.scope and m.node.lineno < c.node.lineno
                                   for m in made)]  # fmt: skip
            if need.soft is not None:  # a print that can stay a print: it does in a
                if outside:  # function that may run before the owner made the accelerator
                    self._later.append(partial(context.edits.cancel, need.soft))
                    context.needs.remove(need)
                continue
            if outside:
                call = outside[0]
                context.block_file(Finding(code="MIG900", node=owner.node, message=(
                    f"the Accelerator must be made in `{owner.name}()`, whose values its "
                    f"arguments read, but `{scope.name}()` uses it and runs from "
                    f"{f'`{call.scope.name}()`' if call.scope.kind == 'function' else 'module level'} "
                    f"(line {call.node.lineno}), outside `{owner.name}()`; migrate by hand")))  # fmt: skip
                return False
        return True

    @staticmethod
    def _import(context: RuleContext, body: Block) -> None:
        """`from runtime import Accelerator` (with the names its arguments need) at the end of
        the file's leading imports."""
        source = context.import_source
        if (source, "Accelerator") in context.facts.index.imports.from_imports:
            return
        index = 0
        for position, node in enumerate(body.statements):
            if not (is_import(node) or (position == 0 and is_docstring(node))):
                break
            index = position + 1
        names = ", ".join(["Accelerator", *context.accelerator_imports])
        statement = context.statement(f"from {source} import {names}\n")
        context.edits.insert(body.holder, index, statement, priority=-10)

    @staticmethod
    def _creation_index(block: Block, dependencies: set[str], start: int | None, first: int) -> int:
        """After the imports that come before the first code needing the accelerator (an
        import further down the module, before the model, does not push it past that code)
        and after the definitions its arguments read."""
        index = after_imports(block, first) if start is None else start
        for name in dependencies:
            for _binding, statement in definitions(block, name):
                index = max(index, statement.index + 1)
        return index

    @staticmethod
    def _hard_need_before(context: RuleContext, block: Block, index: int) -> bool:
        positions = [position_in(n, block) for n in context.needs if n.soft is None]
        return any(p is not None and p < index for p in positions)

    def _move_devices(self, context: RuleContext, block: Block, index: int, module: Block,
                      moved: list) -> None:  # fmt: skip
        """Module-level `device = ...` lines only the guard reads go into it, after the
        Accelerator; prints before the guard stay prints."""
        for small, name in moved:
            self._later.append(partial(context.edits.remove, small))
            line = context.statement(f"{name} = {context.accelerator}.device\n")
            self._later.append(partial(context.edits.insert, block.holder, index, line, priority=1))
        kept = [n for n in context.needs if position_in(n, block) is not None
                or position_in(n, module) is None]  # fmt: skip
        for need in context.needs:
            if need not in kept and need.soft is not None:
                self._later.append(partial(context.edits.cancel, need.soft))
        context.needs[:] = [n for n in kept]

    def _settle_needs(self, context: RuleContext, block: Block, index: int) -> bool:
        """Drop soft needs that come before the accelerator exists; False on a hard one (a
        MIG900 naming the first such code and the values the Accelerator waits for)."""
        early = []
        for need in list(context.needs):
            position = position_in(need, block)
            if position is None or position >= index:
                continue
            if need.fallback is not None:  # before the accelerator: the process-wide state
                self._later.append(need.fallback)
                context.needs.remove(need)
                continue
            if need.soft is not None:
                self._later.append(partial(context.edits.cancel, need.soft))
                continue
            early.append((position, need_line(need), need))
        if not early:
            return True
        position, _line, need = min(early, key=lambda found: found[:2])
        node = block.statements[min(position, len(block.statements) - 1)]
        context.block_file(Finding(code="MIG900", node=node, message=(
            f"the Accelerator's {late_arguments(context, block, index)}, but "
            f"{need_words(context, need, node)} already uses the accelerator; migrate by hand"
        )))  # fmt: skip
        return False


def _values(kwargs) -> list[tuple[str, str]]:
    """(name, code) of each argument; fp16 is off where `cpu=` holds (the original's autocast
    on "cuda" did nothing to a model on the CPU, and fp16 has no CPU kernels)."""
    cpu = next((k.code for k in kwargs if k.name == "cpu"), None)
    values = []
    for kwarg in kwargs:
        code = kwarg.code
        if kwarg.name == "mixed_precision" and cpu is not None and code.startswith('"fp16"'):
            if cpu == "True":
                code = '"no"'
            elif code == '"fp16"':
                code = f'"fp16" if not ({cpu}) else "no"'
            elif code.endswith(' else "no"'):
                code = code[: -len(' else "no"')] + f' and not ({cpu}) else "no"'
        values.append((kwarg.name, code))
    return values


def _body_start(block: Block) -> int:
    """After a docstring and a leading `super().__init__(...)` (an nn.Module's attributes
    are set after it)."""
    start = 1 if block.statements and is_docstring(block.statements[0]) else 0
    if start < len(block.statements) and _calls_super_init(block.statements[start]):
        start += 1
    return start


def _calls_super_init(statement) -> bool:
    body = statement.body if isinstance(statement, Line) else []
    if len(body) != 1 or not isinstance(body[0], ast.Expr):
        return False
    call = body[0].value
    return (
        isinstance(call, ast.Call)
        and isinstance(call.func, ast.Attribute)
        and call.func.attr == "__init__"
        and isinstance(call.func.value, ast.Call)
        and isinstance(call.func.value.func, ast.Name)
        and call.func.value.func.id == "super"
    )


def _first_need(context: RuleContext, block: Block) -> int:
    """The position in `block` of the first code that needs the accelerator (its end when
    none does there)."""
    positions = [position_in(need, block) for need in context.needs]
    return min((p for p in positions if p is not None), default=len(block.statements))
