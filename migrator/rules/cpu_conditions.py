"""A small boolean algebra for the Accelerator's `cpu=` argument: conditions made of the
script's own expressions (leaves, already written as the code that creates the Accelerator can
read them), simplified as they are combined and written back as Python.

`use_cuda = not args.no_cuda and torch.cuda.is_available()` with CUDA assumed present is
`not args.no_cuda`; the device `"cuda" if use_cuda else "cpu"` is the CPU exactly when
`not (not args.no_cuda)`, written `args.no_cuda`.
"""

from __future__ import annotations

from dataclasses import dataclass

# how tightly an expression binds: or < and < not < comparison < atom
OR, AND, NOT, COMPARISON, ATOM = range(5)
FLIPPED = {"==": "!=", "!=": "==", "is": "is not", "is not": "is", "in": "not in", "not in": "in"}


@dataclass(frozen=True)
class Cond:
    kind: str  # "const", "leaf", "not", "and", "or"
    value: bool = False  # const
    code: str = ""  # leaf: its text
    level: int = ATOM  # leaf: how tightly its text binds
    deps: tuple[str, ...] = ()  # leaf: the names its text reads
    # leaf `subject op "text"`: (subject, op, text), so that its negation flips the operator
    # and `x != "auto" and x == "cpu"` reads `x == "cpu"`
    compare: tuple[str, str, str] | None = None
    parts: tuple[Cond, ...] = ()


TRUE = Cond("const", value=True)
FALSE = Cond("const", value=False)


def leaf(code: str, deps=(), level: int = ATOM) -> Cond:
    return Cond("leaf", code=code, level=level, deps=tuple(deps))


def comparison(subject: str, op: str, text: str, deps=()) -> Cond:
    """`subject op text` (`args.device == "cpu"`), `text` the other operand's code."""
    return Cond("leaf", code=f"{subject} {op} {text}", level=COMPARISON, deps=tuple(deps),
                compare=(subject, op, text))  # fmt: skip


def negate(cond: Cond) -> Cond:
    if cond.kind == "const":
        return TRUE if not cond.value else FALSE
    if cond.kind == "not":
        return cond.parts[0]
    if cond.compare is not None and cond.compare[1] in FLIPPED:
        subject, op, text = cond.compare
        return comparison(subject, FLIPPED[op], text, cond.deps)
    return Cond("not", parts=(cond,))


def both(*conds: Cond) -> Cond:
    return _join("and", conds)


def either(*conds: Cond) -> Cond:
    return _join("or", conds)


def _join(kind: str, conds) -> Cond:
    absorbing, neutral = (FALSE, TRUE) if kind == "and" else (TRUE, FALSE)
    parts: list[Cond] = []
    for cond in conds:
        for part in cond.parts if cond.kind == kind else (cond,):
            if part == absorbing:
                return absorbing
            if part != neutral and render(part) not in {render(p) for p in parts}:
                parts.append(part)
    if kind == "and":
        parts = _narrowed(parts)
    texts = {render(p) for p in parts}
    if any(render(negate(p)) in texts for p in parts):  # `x and not x`, `x or not x`
        return absorbing
    if not parts:
        return neutral
    return parts[0] if len(parts) == 1 else Cond(kind, parts=tuple(parts))


def _narrowed(parts: list[Cond]) -> list[Cond]:
    """`x != "auto" and x == "cpu"` is `x == "cpu"`: an inequality another part's equality
    with another text already implies goes."""
    equal = {(p.compare[0], p.compare[2]) for p in parts if p.compare and p.compare[1] == "=="}
    return [
        p
        for p in parts
        if not (
            p.compare
            and p.compare[1] == "!="
            and any(s == p.compare[0] and t != p.compare[2] for s, t in equal)
        )
    ]


def render(cond: Cond) -> str:
    if cond.kind == "const":
        return str(cond.value)
    if cond.kind == "leaf":
        return cond.code
    if cond.kind == "not":
        return "not " + _wrapped(cond.parts[0], NOT)
    joiner, level = (" and ", AND) if cond.kind == "and" else (" or ", OR)
    return joiner.join(_wrapped(part, level) for part in cond.parts)


def level_of(cond: Cond) -> int:
    return {"const": ATOM, "leaf": cond.level, "not": NOT, "and": AND, "or": OR}[cond.kind]


def _wrapped(cond: Cond, level: int) -> str:
    text = render(cond)
    return f"({text})" if level_of(cond) < level else text


def deps(cond: Cond) -> tuple[str, ...]:
    found = list(cond.deps)
    for part in cond.parts:
        found.extend(deps(part))
    return tuple(dict.fromkeys(found))
