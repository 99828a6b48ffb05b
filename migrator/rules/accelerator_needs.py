"""The Accelerator's arguments and the code that needs it, for MIG001: where an argument can
read its value (the function's parameter instead of a copy made after code that already needs
the accelerator, `config.steps` for `self.steps = config.steps`; at module level, what every
call of the owner passes, `args.amp` for `amp`), and how a MIG900 names the code that needs the
accelerator before its arguments exist.
"""

from __future__ import annotations

import ast
import re

from migrator.analysis.catalogue.patterns import root_name
from migrator.analysis.model.origins import argument_for, call_sites_of, is_method
from migrator.analysis.syntax.index import Block, Scope
from migrator.rules.base import AcceleratorNeed, RuleContext


def callers_arguments(context: RuleContext, owner: Scope) -> bool:
    """An argument reading the owner's parameter (`amp` of `train_model(..., amp=False)`) where
    the Accelerator must be made at module level: every call of the owner, at module level,
    passes the same module value there (`amp=args.amp`), so the Accelerator reads that. True
    if every argument now reads module values; False (nothing rewritten) where an argument
    reads a value the owner makes."""
    module = context.facts.index.module_scope
    sites = call_sites_of(context.facts.index, owner)
    if not sites or any(site.scope is not module for site in sites):
        return False
    rewritten = []
    before = [d for kwarg in context.kwargs for d in kwarg.depends_on]
    if any(owner.is_local(d) and (d not in owner.params or owner.assigns(d)) for d in before):
        return False  # a value the owner makes itself
    for kwarg in context.kwargs:
        code, depends = kwarg.code, kwarg.depends_on
        for name in dict.fromkeys(kwarg.depends_on):
            if name not in owner.params or owner.assigns(name):
                continue
            passed = {_module_value(context, site, owner, name) for site in sites}
            value = passed.pop() if len(passed) == 1 else None
            if value is None:
                return False  # nothing rewritten: the caller refuses
            text, root = value
            code = _reading(code, name, text)
            depends = tuple(root if d == name else d for d in depends)
        rewritten.append((kwarg, code, depends))
    for kwarg, code, depends in rewritten:
        kwarg.code, kwarg.depends_on = code, depends
    return True  # every argument now reads module values (`config` of `main(config)` may
    # be the module's own `config`: the name alone does not tell)


def _module_value(context: RuleContext, site, owner: Scope, name: str) -> tuple | None:
    """(text, root name) of a plain module value (`args.amp`, `amp`) the call passes as
    `name`."""
    argument = argument_for(site.node, owner, name)
    if (
        argument is None
        or any(isinstance(a, ast.Starred) for a in site.node.args)
        or any(k.arg is None for k in site.node.keywords)
    ):
        return None
    if not isinstance(argument, (ast.Name, ast.Attribute)) or root_name(argument) is None:
        return None
    root = root_name(argument)
    bindings = context.facts.index.module_scope.bindings.get(root, [])
    if not bindings or any(
        b.kind not in ("assign", "param") or b.loop is not None for b in bindings
    ):
        return None
    return context.source.text_of(argument), root


# Builtins a copy's value may call: they read their arguments and nothing else.
PURE_BUILTINS = frozenset({"int", "float", "bool", "str", "max", "min", "abs", "len", "round"})


def read_parameters(context: RuleContext, block: Block) -> bool:
    """An argument reading a copy of a parameter made after code that already needs the
    accelerator (`self.steps = config.steps` after `self.device = torch.device(device)`) reads
    the parameter itself (`config.steps`): the function's parameters exist from its start and
    the copy is its one binding, the parameter never rebound. True if an argument changed."""
    scope = block.scope
    hard = [p for n in context.needs if n.soft is None and (p := position_in(n, block)) is not None]
    if scope.kind != "function" or not hard:
        return False
    changed = False
    for kwarg in context.kwargs:
        for name in dict.fromkeys(kwarg.depends_on):
            bindings = scope.assigns(name)
            if len(bindings) != 1:
                continue
            binding = bindings[0]
            statement = binding.statement.ancestor_in(block)
            if statement is None or statement.index < min(hard):
                continue
            inlined = _from_the_start(context, scope, binding)
            if inlined is None:
                continue
            text, roots = inlined
            kwarg.code = _reading(kwarg.code, name, text)
            names = [r for d in kwarg.depends_on for r in (roots if d == name else [d])]
            kwarg.depends_on = tuple(dict.fromkeys(names))
            changed = True
    return changed


def _from_the_start(context: RuleContext, scope: Scope, binding, depth: int = 0):
    """(text, names read) of a copy's value as the function could compute it at its start:
    the parameters it reads (`config.steps` for `self.steps = config.steps`), the copies of
    them it reads spelt out (`config["training"]["mixed_precision"] and
    torch.cuda.is_available()` for `self.use_amp = tcfg["mixed_precision"] and
    torch.cuda.is_available()` after `tcfg = config["training"]`), and imported modules; None
    when it reads anything else (a call of this file's code, a name bound several times, in a
    loop, by unpacking, or a parameter that is rebound)."""
    value = binding.value
    if (
        depth > 4
        or binding.kind != "assign"
        or binding.unpacked
        or binding.loop is not None
        or value is None
    ):
        return None
    imports = context.facts.index.imports
    replaced: list[tuple[ast.Name, str]] = []
    roots: list[str] = []
    for node in ast.walk(value):
        if isinstance(node, (ast.Lambda, ast.NamedExpr, ast.comprehension, ast.Await)):
            return None
        if isinstance(node, ast.Call):
            head = root_name(node.func)
            if head is None or scope.is_local(head) or head in scope.params:
                return None
            if not imports.imported(head) and not (
                isinstance(node.func, ast.Name) and head in PURE_BUILTINS
            ):  # fmt: skip
                return None  # imported modules (`torch.cuda.is_available()`), `max(...)`
        if not isinstance(node, ast.Name):
            continue
        name = node.id
        if name in scope.params:
            if scope.assigns(name) or (is_method(scope) and name == scope.params[0]):
                return None  # rebound, or `self.x` (it may be set later)
            roots.append(name)
        elif scope.is_local(name):
            local = scope.assigns(name)
            inner = (
                _from_the_start(context, scope, local[0], depth + 1) if len(local) == 1 else None
            )
            if inner is None:
                return None
            text, names = inner
            replaced.append((node, text if _atom(local[0].value) else f"({text})"))
            roots.extend(names)
        elif name in PURE_BUILTINS and not context.facts.index.module_scope.is_local(name):
            continue
        elif not imports.imported(name):
            return None  # a module-level name: it may be bound after the function is defined
        else:
            roots.append(name)
    text = context.source.text_of(value)
    if replaced:
        if value.lineno != value.end_lineno:
            return None
        raw = text.encode()
        start = value.col_offset
        for node, inner in sorted(replaced, key=lambda r: r[0].col_offset, reverse=True):
            left, right = node.col_offset - start, node.end_col_offset - start
            raw = raw[:left] + inner.encode() + raw[right:]
        text = raw.decode()
    if not _atom(value) and depth == 0:
        text = f"({text})"
    return text, list(dict.fromkeys(roots))


def _atom(value: ast.expr) -> bool:
    return isinstance(value, (ast.Name, ast.Attribute, ast.Subscript, ast.Call, ast.Constant))


def definitions(block: Block, name: str):
    """(binding, the statement of `block` that holds it) for each assignment of `name` in the
    block's scope that runs in `block`."""
    for binding in block.scope.assigns(name):
        statement = binding.statement.ancestor_in(block)
        if statement is not None:
            yield binding, statement


def _reading(code: str, name: str, text: str) -> str:
    """An Accelerator argument's `code` reading `text` where it read `name` (a name or an
    attribute chain, whole), each condition once."""
    pattern = rf"(?<![\w.]){re.escape(name)}(?!\w)"
    return _once_each(re.sub(pattern, lambda _match: text, code))


def _once_each(code: str) -> str:
    """`"fp16" if amp and amp and ... else "no"` (a copy and its parameter, now one name) reads
    each condition once."""
    if "\n" in code:
        return code
    expression = ast.parse(code, mode="eval").body
    test = expression.test if isinstance(expression, ast.IfExp) else None
    if not (isinstance(test, ast.BoolOp) and isinstance(test.op, ast.And)):
        return code
    parts = dict.fromkeys(ast.get_source_segment(code, value) for value in _conjuncts(test))
    joined = " and ".join(part for part in parts if part is not None)
    raw = code.encode()  # offsets count bytes
    return (raw[: test.col_offset] + joined.encode() + raw[test.end_col_offset :]).decode()


def _conjuncts(test: ast.BoolOp) -> list[ast.expr]:
    """The operands of `a and (b and c)`, flattened: a, b, c."""
    found = []
    for value in test.values:
        nested = isinstance(value, ast.BoolOp) and isinstance(value.op, ast.And)
        found.extend(_conjuncts(value) if nested else [value])
    return found


def need_line(need: AcceleratorNeed) -> int:
    statements = need.block.statements
    return statements[min(need.index, len(statements) - 1)].lineno if statements else 0


def need_words(context: RuleContext, need: AcceleratorNeed, outer: ast.stmt | None = None) -> str:
    """ "`device = torch.device(...)` at line 3", "`accelerator.prepare(...)`, which goes
    before line 9," and, nested in `outer`, "(inside the `if` at line 5)"."""
    statements = need.block.statements
    node = statements[min(need.index, len(statements) - 1)]
    decorated = getattr(node, "decorator_list", None)
    if need.inserted:
        words = f"`{need.inserted}`, which goes before line {node.lineno},"
    elif decorated:
        decorator = decorated[0]
        words = (
            f"`@{context.source.text_of(decorator)}` on `{node.name}` at line {decorator.lineno}"
        )
    else:
        words = f"`{context.source.text_of(node).splitlines()[0].strip()}` at line {node.lineno}"
    if outer is not None and node is not outer:
        keyword = context.source.text_of(outer).split(None, 1)[0].rstrip(":")
        words += (
            f" (inside the `{keyword}` at line {outer.lineno}; the Accelerator is made outside "
            "it, for code there that needs it too)"
        )
    return words


def late_arguments(context: RuleContext, block: Block, index: int) -> str:
    """What the Accelerator's arguments read and where it is defined: "mixed_precision= reads
    `amp`, defined at line 313"."""
    said = []
    for kwarg in context.kwargs:
        lines = {}
        for name in kwarg.depends_on:
            for binding, statement in definitions(block, name):
                if statement.index + 1 >= index:
                    lines[name] = binding.statement.node.lineno
        if lines:
            where = ", ".join(f"`{n}`, defined at line {line}" for n, line in lines.items())
            said.append(f"{kwarg.name}= reads {where}")
    return "; ".join(said) or "arguments read values defined later"


def position_in(need: AcceleratorNeed, block: Block) -> int | None:
    """Where, in `block`, the code with this need runs (None: elsewhere, or later)."""
    if need.block is block:
        return need.index
    if need.block.scope is not block.scope:
        return None  # another function: it runs when called, after creation
    parent = need.block.parent
    while parent is not None and parent.block is not block:
        parent = parent.block.parent
    return parent.index if parent is not None else None
