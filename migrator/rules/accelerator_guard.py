"""The Accelerator made inside a module-level `if` (an `if __name__ == "__main__":` guard) when
its arguments read values that `if` defines (`accumulation_steps = 4` before the
`gradient_accumulation_steps=` it feeds) and module code before the `if` already needs it.

Made right after those values, in the same branch, when everything that needs it runs there
afterwards: code of that branch, functions called only from there, and a module-level
`device = torch.device(...)` that only that branch reads, which moves in as
`device = accelerator.device` right after the Accelerator. Prints before the guard stay
prints. Anything else (a need after the `if`, in another branch, in a function called from
elsewhere, a device read elsewhere) leaves the file to MIG001's finding.

`main_guard_point`: an Accelerator MIG001 would make at module level, whose every user runs
from the script's `if __name__ == "__main__":` (functions called only from there, directly or
through one another, or handed to `mp.spawn` there), is made as that block's first statement
instead. A module-level Accelerator runs again in every process that imports the script: the
DataLoader workers that start by spawn or forkserver (the default of Python 3.14 on Linux)
would each set up the process group again and hang.
"""

from __future__ import annotations

import ast

from migrator.analysis.model.origins import call_sites_of
from migrator.analysis.syntax.index import Block, Line, Scope, Statement
from migrator.analysis.syntax.points import PROGRAM_FILE_MARKER


def guard_point(context, module: Block, dependencies: set[str]) -> tuple | None:
    """(branch block, index, moved device statements) where the Accelerator can be made
    inside a module-level `if`, or None."""
    scope = module.scope
    branch = _dependency_branch(scope, module, dependencies)
    if branch is None:
        return None
    guard = branch.parent.index
    index = max(b.statement.ancestor_in(branch).index + 1 for name in dependencies
                for b in scope.assigns(name) if b.statement.ancestor_in(branch) is not None)  # fmt: skip
    moved = []
    for need in context.needs:
        if need.scope is not scope:
            if not _called_only_after(context, need.scope, branch, index):
                return None
            continue
        top = _position(need.block, need.index, module)
        if top == guard:
            inner = _position(need.block, need.index, branch)
            if inner is None or inner < index:
                return None
        elif top > guard:
            return None
        elif need.soft is None:
            device = _device_line(context, module.statements[top], branch, index)
            if device is None:
                return None
            moved.append(device)
    return branch, index, moved


def main_guard_point(context, module: Block, index: int) -> tuple | None:
    """(the `if __name__ == "__main__":` body, 0, moved device statements) when everything
    that needs the accelerator runs from that block, after `index`; None otherwise."""
    scope = module.scope
    statements = module.statements
    # the module's last statement (in a joined program, the entry's: before its end marker)
    guard = len(statements) - 1
    if guard > 0 and _program_marker(statements[guard]):
        guard -= 1
    if guard < index or not _is_main_guard(statements[guard]):
        return None
    branch = context.facts.index.block(module.statements[guard], "body")
    if branch is None:
        return None
    moved = []
    for need in context.needs:
        if need.scope is not scope:
            if not _main_only(context, need.scope, branch, set()):
                return None
            continue
        top = _position(need.block, need.index, module)
        if top is None or top > guard:
            return None
        if need.block is module and top == guard and need.soft is None:
            return None  # code inserted before the guard
        if top < guard and need.soft is None:
            device = _device_line(context, module.statements[top], branch, 0)
            if device is None:
                return None
            moved.append(device)
    return branch, 0, moved


def runs_at_import(statement: Statement) -> bool:
    """Module code outside the `if __name__ == "__main__":` of a script that has one: it runs
    in every process that imports the script (DataLoader workers started by spawn or
    forkserver too). A script with no such `if` is all module code: it runs as a program."""
    module = statement.block.scope
    if module.kind != "module":
        return False
    if not any(_is_main_guard(node) for node in module.body.statements):
        return False
    return not any(_is_main_guard(outer.node) for outer in statement.chain()[:-1])


def _program_marker(node) -> bool:
    """`__migrator_program_file__ = N`, the end of a file in a joined program."""
    small = node.body[0] if isinstance(node, Line) and len(node.body) == 1 else None
    return (
        isinstance(small, ast.Assign)
        and isinstance(small.targets[0], ast.Name)
        and small.targets[0].id == PROGRAM_FILE_MARKER
    )


def _is_main_guard(node) -> bool:
    test = node.test if isinstance(node, ast.If) and not node.orelse else None
    return (
        isinstance(test, ast.Compare)
        and isinstance(test.left, ast.Name)
        and test.left.id == "__name__"
        and len(test.comparators) == 1
        and isinstance(test.comparators[0], ast.Constant)
        and test.comparators[0].value == "__main__"
    )


def _main_only(context, scope: Scope, branch: Block, seen: set) -> bool:
    """Does the module-level function holding `scope` run only from `branch` (called there,
    handed to `spawn` there, or called only from functions that do)?"""
    while scope.parent is not None and scope.parent.kind != "module":
        scope = scope.parent
    if scope.kind != "function" or scope.parent is None:
        return False
    if id(scope) in seen:
        return True
    seen.add(id(scope))
    index = context.facts.index
    module = index.module_scope
    uses = [
        use for s in index.scopes if s is module or not s.is_local(scope.name)
        for use in s.uses.get(scope.name, ())
    ]  # fmt: skip
    if not uses:
        return False
    for use in uses:
        here = use.statement.ancestor_in(branch) is not None
        if use.kind == "arg" and here and _spawns(use.call):
            continue
        if use.kind != "call":
            return False
        if here:
            continue
        if use.statement.block.scope is module or not _main_only(
            context, use.statement.block.scope, branch, seen
        ):
            return False
    return True


def _spawns(call) -> bool:
    func = call.func if isinstance(call, ast.Call) else None
    name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", None)
    return name in ("spawn", "start_processes") and call.args and isinstance(call.args[0], ast.Name)


def _dependency_branch(scope: Scope, module: Block, dependencies: set[str]) -> Block | None:
    """The branch of a module-level `if` that binds the last of `dependencies` to be bound;
    None when they are bound elsewhere after it, or not in such a branch."""
    branch = None
    for name in dependencies:
        for binding in scope.assigns(name):
            chain = binding.statement.chain()
            if len(chain) < 2 or not isinstance(chain[0].node, ast.If):
                continue
            block = chain[1].block
            if block.kind != "body" or (branch is not None and block is not branch):
                return None
            branch = block
    if branch is None:
        return None
    guard = branch.parent.index
    for name in dependencies:  # bound at the top level after the `if`: not ours
        for binding in scope.assigns(name):
            top = binding.statement.ancestor_in(module)
            if top is not None and top.index > guard:
                return None
    return branch


def _position(block: Block, index: int, outer: Block) -> int | None:
    """The index in `outer` of the statement holding `block.statements[index]`."""
    if block is outer:
        return index
    parent = block.parent
    while parent is not None and parent.block is not outer:
        parent = parent.block.parent
    return parent.index if parent is not None else None


def _called_only_after(context, scope: Scope, branch: Block, index: int) -> bool:
    """Does the function holding `scope` run only from `branch`, at `index` or later?"""
    while scope.parent is not None and scope.parent.kind != "module":
        scope = scope.parent
    if scope.kind != "function":
        return False
    calls = call_sites_of(context.facts.index, scope)
    for call in calls:
        found = call.statement.ancestor_in(branch)
        if call.scope is not branch.scope or found is None or found.index < index:
            return False
    return bool(calls)


def _device_line(context, node, branch: Block, index: int) -> tuple | None:
    """`device = torch.device(...)` (now `device = accelerator.device`) whose name only
    `branch` reads, from `index` on, and functions that run only from there (when `branch` is
    the `__main__` block): (its small statement, the name)."""
    if not isinstance(node, Line) or len(node.body) != 1:
        return None
    small = node.body[0]
    facts = context.facts
    bindings = [b for b in facts.device_bindings if b.small is small]
    if len(bindings) != 1 or not isinstance(small, ast.Assign) or len(small.targets) != 1:
        return None
    name = bindings[0].name
    if not isinstance(small.targets[0], ast.Name):
        return None
    module = facts.index.module_scope
    main = _is_main_guard(branch.parent.node if branch.parent else None)
    for scope in facts.index.scopes:
        reads = scope is not module and not scope.is_local(name) and scope.uses.get(name)
        if reads and not (main and _main_only(context, scope, branch, set())):
            return None  # a function reads the module's device (and runs elsewhere)
    for use in module.uses.get(name, []):
        found = use.statement.ancestor_in(branch)
        if found is None or found.index < index:
            return None
    if len(module.assigns(name)) != 1:
        return None
    return small, name
