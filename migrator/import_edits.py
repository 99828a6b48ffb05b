"""Adding and removing imports once the other edits are made, on the edited text.

- `add_module_imports`: `import torch` goes after the file's leading run of import lines (after
  a docstring), with a blank line before the code that follows; nothing when the leading
  imports already have it.
- `remove_unused_imports`: the imports rules retired (`from torch.cuda.amp import GradScaler`,
  `import torch.distributed as dist`) go where nothing in the edited module uses them any more
  (a use is a name read in a scope that sees the import, an `__all__` entry or a string
  annotation); one name goes from a list, the whole statement (its comments above it too)
  when none is left, and a block left empty gets `pass`.
These are the placements and layouts LibCST's AddImportsVisitor / RemoveImportsVisitor gave.
"""

from __future__ import annotations

import ast

from migrator.analysis.syntax.index import COMPOUND, Block, Line
from migrator.analysis.syntax.indexer import group_statements
from migrator.arglists import Item, has_comma
from migrator.layout import Layout, blocks_in_order, first_line, is_suite, semicolon_end
from migrator.name_usage import NameUsage
from migrator.source import Source, skip_space_and_comments


def add_module_imports(text: str, modules: list[str], tree: ast.Module) -> str:
    """`text` with `import <module>` for each of `modules` it lacks (`tree` is its parse)."""
    source = Source(text)
    entries = group_statements(source, tree.body)
    start = 1 if entries and _skip_first(entries[0]) else 0
    position = start
    present: set[str] = set()
    for entry in entries[start:]:
        if not (isinstance(entry, Line) and len(entry.body) == 1 and isinstance(
            entry.body[0], (ast.Import, ast.ImportFrom)
        )):  # fmt: skip
            break
        small = entry.body[0]
        if isinstance(small, ast.Import):
            present.update(a.name for a in small.names if a.asname is None)
        position += 1
    wanted = sorted({m for m in modules if m not in present})
    if not wanted:
        return text
    newline = source.newline
    new = "".join(f"import {module}{newline}" for module in wanted)
    if not entries:
        return _append(text, new, newline)
    if position == 0:  # below the module's header comments, a blank line before the code
        at = source.line_starts[first_line(entries[0]) - 1]
        return text[:at] + new + newline + text[at:]
    last = Layout(source).last_line(entries[position - 1])
    at = source.line_end(last)
    if position < len(entries):
        leading = [source.line_text(n) for n in range(last + 1, first_line(entries[position]))]
        if not leading or leading[0].lstrip(" \t\f").startswith("#"):
            new += newline
    if at == len(text) and text and not text.endswith(("\n", "\r")):
        new = newline + new
    return text[:at] + new + text[at:]


def _append(text: str, new: str, newline: str) -> str:
    if text and not text.endswith(("\n", "\r")):
        return text + newline + new
    return text + new


def _skip_first(entry) -> bool:
    if not isinstance(entry, Line) or len(entry.body) != 1:
        return False
    small = entry.body[0]
    if isinstance(small, ast.Expr):
        return isinstance(small.value, ast.Constant) and isinstance(small.value.value, (str, bytes))
    return (
        isinstance(small, ast.Assign)
        and len(small.targets) == 1
        and isinstance(small.targets[0], ast.Name)
        and small.targets[0].id == "__strict__"
    )


# -- removal ---------------------------------------------------------------------------------
def remove_unused_imports(text: str, entries: list, tree: ast.Module) -> str:
    """`text` without the import `entries` (module, name, asname) nothing uses any more."""
    source = Source(text)
    unused_modules = {module: asname for module, obj, asname in entries if obj is None}
    unused_objects: dict[str, set] = {}
    for module, obj, asname in entries:
        if obj is not None:
            unused_objects.setdefault(module, set()).add((obj, asname))
    usage = NameUsage(tree)
    edits: list[tuple[int, int, str]] = []
    removed_smalls: set[int] = set()
    for scope_node, node in _imports(tree):
        if isinstance(node, ast.Import):
            keep = [
                alias for alias in node.names
                if alias.name not in unused_modules
                or alias.asname != unused_modules[alias.name]
                or usage.used(scope_node, _import_names(alias))
            ]  # fmt: skip
            if len(keep) == len(node.names):
                continue
            if not keep:
                removed_smalls.add(id(node))
                continue
            edits.append((*source.span(node), _render_import(source, node, keep)))
        elif (
            isinstance(node, ast.ImportFrom)
            and not node.level
            and node.module in unused_objects
            and node.names[0].name != "*"
            and node.module != "__future__"
        ):
            objects = unused_objects[node.module]
            gone = [
                (alias.name, alias.asname) in objects
                and not usage.used(scope_node, [alias.asname or alias.name])
                for alias in node.names
            ]
            if not any(gone):
                continue
            if all(gone):
                removed_smalls.add(id(node))
                continue
            edits.append((*source.span(node), _render_from(source, node, gone)))
    if removed_smalls:
        edits += _statement_removals(source, tree, removed_smalls)
    started_with_code = not text[:1].isspace()
    for start, end, replacement in sorted(edits, key=lambda e: e[0], reverse=True):
        text = text[:start] + replacement + text[end:]
    if started_with_code:  # the first line was an import now gone: no blank line opens the file
        text = text.lstrip("\r\n")
    return text


def _import_names(alias: ast.alias) -> list[str]:
    if alias.asname is not None:
        return [alias.asname]
    parts = alias.name.split(".")
    return [".".join(parts[: i + 1]) for i in range(len(parts))]


def _imports(tree: ast.Module):
    """(scope node, import statement) for every import, in source order."""
    stack = [(tree, tree)]
    while stack:
        scope, node = stack.pop()
        children = list(ast.iter_child_nodes(node))
        for child in reversed(children):
            if isinstance(child, (ast.Import, ast.ImportFrom)):
                stack.append((scope, child))
            elif isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                stack.append((child, child))
            elif isinstance(child, (ast.stmt, ast.excepthandler, ast.match_case)):
                stack.append((scope, child))
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            yield scope, node


def _items(source: Source, node, aliases) -> tuple[str, str, list[Item], str]:
    """(head, lead, items, close) of an import statement's names."""
    text = source.text
    spans = [source.span(alias) for alias in aliases]
    start, end = source.span(node)
    if isinstance(node, ast.ImportFrom):
        keyword_end = _import_keyword_end(text, start, spans[0][0])
        opening = skip_space_and_comments(text, keyword_end)
        if text[opening] == "(":
            head_end = opening + 1
            close_start = end - 1
        else:
            head_end = spans[0][0]
            close_start = end
    else:
        head_end = spans[0][0]
        close_start = end
    lead = text[head_end : spans[0][0]]
    items = []
    tail = ""
    for position, (span, alias) in enumerate(zip(spans, aliases)):
        following = spans[position + 1][0] if position + 1 < len(spans) else close_start
        gap = text[span[1] : following]
        item_text = text[span[0] : span[1]]
        if has_comma(gap):
            items.append(Item(item_text, gap, "", alias))
        else:
            items.append(Item(item_text, None, "", alias))
            tail = gap
    close = tail + text[close_start:end]
    return text[start:head_end], lead, items, close


def _import_keyword_end(text: str, start: int, first_alias: int) -> int:
    index = text.rfind("import", start, first_alias)
    return index + len("import")


def _render(head: str, lead: str, items: list[Item], close: str) -> str:
    parts = [head, lead]
    for position, item in enumerate(items):
        parts.append(item.text)
        if item.comma is not None:
            parts.append(item.comma)
        elif position != len(items) - 1:
            parts.append(", ")
    parts.append(close)
    return "".join(parts)


def _render_import(source: Source, node: ast.Import, keep: list) -> str:
    head, lead, items, close = _items(source, node, node.names)
    kept = [item for item in items if item.node in keep]
    if kept[-1] is not items[-1]:
        kept[-1] = Item(kept[-1].text, None, "", kept[-1].node)
    return _render(head, lead, kept, close)


def _render_from(source: Source, node: ast.ImportFrom, gone: list[bool]) -> str:
    head, lead, items, close = _items(source, node, node.names)
    kept: list[Item] = []
    for item, removed in zip(items, gone):
        if not removed:
            kept.append(item)
            continue
        if item.comma is None:
            continue
        if kept:
            previous = kept[-1]
            if previous.comma is not None:
                before, after = _split_comma(previous.comma)
                merged = _merge_whitespace(after, _split_comma(item.comma)[1])
                kept[-1] = Item(previous.text, before + "," + merged, "", previous.node)
            else:
                kept[-1] = Item(previous.text, item.comma, "", previous.node)
        elif head.endswith("("):
            lead = _merge_whitespace(lead, _split_comma(item.comma)[1])
    if kept[-1] is not items[-1]:
        kept[-1] = Item(kept[-1].text, None, "", kept[-1].node)
    return _render(head, lead, kept, close)


def _split_comma(comma: str) -> tuple[str, str]:
    index = comma.index(",")
    return comma[:index], comma[index + 1 :]


def _merge_whitespace(left: str, right: str) -> str:
    """LibCST's merge of two parenthesized whitespaces: the left one, with the comment lines
    of the right one in between."""
    if "\n" not in right and "\r" not in right:
        return left
    if "\n" not in left and "\r" not in left:
        return right
    left_lines = left.splitlines(keepends=True)
    right_lines = right.splitlines(keepends=True)
    comments = [line for line in right_lines[1:-1] if line.lstrip(" \t\f").startswith("#")]
    if right_lines and right_lines[-1].endswith(("\n", "\r")) and len(right_lines) > 1:
        comments += [line for line in right_lines[-1:] if line.lstrip().startswith("#")]
    last = left_lines[-1] if not left_lines[-1].endswith(("\n", "\r")) else ""
    first = left_lines[0]
    return first + "".join(comments) + last


def _statement_removals(source: Source, tree: ast.Module, removed: set[int]):
    """Text edits removing import statements (and the lines left empty) as RemoveFromParent
    did: a statement's leading comments go with it; an emptied block gets `pass`."""
    edits = []
    layout = Layout(source)
    for statements in _all_blocks(tree, layout.is_elif):
        entries = group_statements(source, statements)
        kind = "module" if statements is tree.body else (
            "suite" if is_suite(source, statements[0]) else "body")  # fmt: skip
        block = Block(kind=kind, statements=entries, scope=None, parent=None)
        touched = [
            entry for entry in entries
            if isinstance(entry, Line) and any(id(s) in removed for s in entry.body)
        ] if kind != "suite" else [e for e in entries if id(e) in removed]  # fmt: skip
        if not touched:
            continue
        if kind == "suite":
            edits += _suite_removals(source, entries, removed)
            continue
        shape = layout.block(block)
        emptied = all(
            isinstance(entry, Line) and all(id(s) in removed for s in entry.body)
            for entry in entries
        )
        for statement in shape.statements:
            entry = statement.node
            if not isinstance(entry, Line) or not any(id(s) in removed for s in entry.body):
                continue
            if all(id(s) in removed for s in entry.body):
                start = source.line_starts[statement.first_line - len(statement.leading) - 1]
                end = source.line_end(statement.last_line)
                edits.append((start, end, ""))
            else:
                for small in entry.body:
                    if id(small) in removed:
                        edits.append((source.start(small), semicolon_end(source, small), ""))
        if emptied and kind == "body":
            at = source.line_end(shape.statements[-1].last_line)
            edits.append((at, at, shape.indent + "pass" + source.newline))
    return edits


def _suite_removals(source: Source, smalls: list, removed: set[int]):
    if all(id(s) in removed for s in smalls):
        return [(source.start(smalls[0]), semicolon_end(source, smalls[-1]), "pass")]
    return [(source.start(s), semicolon_end(source, s), "") for s in smalls if id(s) in removed]


def _all_blocks(tree: ast.Module, is_elif):
    stack = [tree.body]
    while stack:
        statements = stack.pop()
        yield statements
        for node in statements:
            if isinstance(node, COMPOUND):
                stack.extend(blocks_in_order(node, is_elif))
