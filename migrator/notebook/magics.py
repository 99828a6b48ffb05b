"""IPython syntax in code cells, hidden from the analysis and restored verbatim afterwards.

Each line of IPython syntax becomes a placeholder statement of the same indentation, so line
numbers are kept, the cell stays valid Python and the analysis sees a statement that means
nothing to it: `import __migrate_magic_<n>__` among the program's leading imports (so
`%matplotlib inline` or `!pip install` among a first cell's imports do not end the imports
block, after which the Accelerator's import goes), the bare name `__migrate_magic_<n>__`
everywhere else (an import there would move "after the imports" below it). Restoring puts the
original line back; when a rewrite re-indented the placeholder (a loop body moved into
`with accelerator.accumulate(model):`), the line moves with it.

Recognised, at the start of a statement (not inside brackets, strings or continued lines):
- `%%magic` on the first line of a cell: the whole cell, except `%%time` and `%%capture`,
  whose body runs as Python in the notebook's namespace and is analysed;
- `%magic`, `!shell`, `?name`, `name?`, `name??`, `x = %magic`, `x = !shell`;
- automagic: a line starting with a magic's name (`pip install torch`, `cd ..`) that is not
  Python by itself;
- continuation lines of any of these (a trailing backslash).
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass, field

PLACEHOLDER = "__migrate_magic_{}__"
PLACEHOLDER_LINE = re.compile(r"([ \t]*)(?:import )?__migrate_magic_(\d+)__[ \t]*")
# `%time <statement>` runs the statement once in the notebook's namespace: analysed as the
# statement, marked by a comment that brings the `%time` back
TIMED = "__migrate_time_{}__"
TIMED_LINE = re.compile(r"([ \t]*)(.*?)[ \t]*# __migrate_time_(\d+)__[ \t]*")
_TIME = re.compile(r"([ \t]*)%time[ \t]+(.+)")
_IMPORT = re.compile(r"(?:import|from)[ \t]")
# Cell magics whose body IPython runs as ordinary Python code in the user namespace.
PYTHON_BODY_CELL_MAGICS = frozenset({"time", "capture"})
# Line magics and shell aliases IPython runs without `%` when automagic is on (its default).
AUTOMAGICS = frozenset({
    "alias", "alias_magic", "autoawait", "autocall", "automagic", "bookmark", "cat", "cd",
    "clear", "colors", "conda", "config", "cp", "debug", "dhist", "dirs", "doctest_mode", "edit",
    "env", "gui", "history", "killbgscripts", "ldir", "less", "load", "load_ext", "loadpy",
    "logoff", "logon", "logstart", "logstate", "logstop", "ls", "lsmagic", "macro", "magic",
    "man", "mamba", "matplotlib", "micromamba", "mkdir", "more", "mv", "notebook", "page",
    "pastebin", "pdb", "pdef", "pdoc", "pfile", "pinfo", "pinfo2", "pip", "popd", "pprint",
    "precision", "prun", "psearch", "psource", "pushd", "pwd", "pycat", "pylab", "quickref",
    "recall", "rehashx", "reload_ext", "rerun", "reset", "reset_selective", "rm", "rmdir", "run",
    "save", "sc", "set_env", "store", "sx", "system", "tb", "time", "timeit", "unalias",
    "unload_ext", "who", "who_ls", "whos", "xdel", "xmode",
})  # fmt: skip
_ASSIGNED = re.compile(r"[ \t]*[A-Za-z_][\w.]*(?:[ \t]*,[ \t]*[A-Za-z_][\w.]*)*[ \t]*=[ \t]*[!%]")
_FIRST_WORD = re.compile(r"[ \t]*([A-Za-z_]\w*)[ \t]+(.*)")
# After a name, what makes a line Python rather than automagic: `run = (`, `env[k] = v`, ...
_PYTHON_AFTER_NAME = re.compile(
    r"(?:=(?!=)|==|[-+*/%&|^@<>!]=|\*\*=|//=|>>=|<<=|[(\[,:;]|\.[A-Za-z_]|(?:is|in|not|and|or|if)\b)"
)


@dataclass
class Masker:
    """Hides the IPython lines of one notebook's cells; ids are unique across its cells."""

    originals: dict[int, tuple[str, str]] = field(default_factory=dict)  # id -> (line, indent)
    leading: bool = True  # no statement but imports (and IPython lines) seen yet

    def mask(self, source: str) -> str:
        lines = split_lines(source)
        first = next((i for i, line in enumerate(lines) if line.strip()), None)
        hidden_first = False
        if first is not None and lines[first].lstrip().startswith("%%"):
            name = lines[first].lstrip()[2:].split(maxsplit=1)
            if not name or name[0] not in PYTHON_BODY_CELL_MAGICS:
                return "".join(self._hide(line, "") if line.strip() else line for line in lines)
            lines[first] = self._hide(lines[first], "")
            hidden_first = True
        out = []
        scanner = _Scanner()
        continues_magic = False
        indent = ""
        for number, line in enumerate(lines):
            content = line.rstrip("\r\n")
            if hidden_first and number == first:
                out.append(line)
            elif (
                not continues_magic and scanner.at_statement_start() and (timed := _timed(content))
            ):  # `%time x, y = test(loader)`: the statement is the program's, analysed
                out.append(self._time(line, timed))
                scanner.feed(timed)
            elif continues_magic or (scanner.at_statement_start() and is_ipython_line(content)):
                if not continues_magic:
                    indent = content[: len(content) - len(content.lstrip())]
                out.append(self._hide(line, indent))
                continues_magic = content.endswith("\\")
            else:
                if scanner.at_statement_start() and _is_code(content):
                    self.leading = self.leading and _IMPORT.match(content) is not None
                out.append(line)
                scanner.feed(content)
        return "".join(out)

    def restore(self, line: str) -> tuple[str, int | None]:
        """(the original line, its id) for a placeholder, the `%time` line of a timed
        statement (as the migration left the statement); (line, None) otherwise."""
        content = line.rstrip("\r\n")
        timed = TIMED_LINE.fullmatch(content)
        if timed is not None:
            indent, statement, number = timed.group(1), timed.group(2), int(timed.group(3))
            return f"{indent}%time {statement}" + line[len(content) :], number
        match = PLACEHOLDER_LINE.fullmatch(content)
        if match is None:
            return line, None
        indent, number = match.group(1), int(match.group(2))
        original, base = self.originals[number]
        if indent != base and original.startswith(base):
            original = indent + original[len(base) :]
        return original + line[len(content) :], number

    def _time(self, line: str, statement: str) -> str:
        """`%time <statement>` as the statement, marked to get its `%time` back."""
        content = line.rstrip("\r\n")
        number = len(self.originals)
        indent = content[: len(content) - len(content.lstrip())]
        self.originals[number] = (content, indent)
        self.leading = False
        return f"{indent}{statement}  # {TIMED.format(number)}" + line[len(content) :]

    def _hide(self, line: str, indent: str) -> str:
        content = line.rstrip("\r\n")
        number = len(self.originals)
        self.originals[number] = (content, indent)
        placeholder = PLACEHOLDER.format(number)
        if self.leading:
            placeholder = "import " + placeholder
        return indent + placeholder + line[len(content) :]


def _timed(content: str) -> str | None:
    """The statement of a `%time <statement>` line, where it is one simple statement of
    Python with no comment; None otherwise (`%timeit` runs it many times: hidden as any
    magic)."""
    match = _TIME.fullmatch(content)
    if match is None or content.endswith("\\") or "#" in match.group(2):
        return None
    statement = match.group(2).rstrip()
    try:
        body = ast.parse(statement).body
    except SyntaxError:
        return None
    compound = (ast.If, ast.For, ast.AsyncFor, ast.While, ast.With, ast.AsyncWith, ast.Try,
                ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Match)  # fmt: skip
    return statement if len(body) == 1 and not isinstance(body[0], compound) else None


def is_ipython_line(content: str) -> bool:
    """Is this line, at the start of a statement, IPython syntax rather than Python?"""
    if not _is_code(content):
        return False
    stripped = content.strip()
    if stripped[0] in "%!?":
        return True
    if _ASSIGNED.match(content):
        return True
    if _code_part(stripped).endswith("?"):
        return True
    word = _FIRST_WORD.match(content)
    if word is not None and word.group(1) in AUTOMAGICS:
        return not _PYTHON_AFTER_NAME.match(word.group(2)) and not parses(stripped)
    return False


def _is_code(content: str) -> bool:
    stripped = content.strip()
    return bool(stripped) and not stripped.startswith("#")


def split_lines(text: str) -> list[str]:
    """Lines with their endings, split at "\\n" only (as the notebook stores them)."""
    return re.findall(r"[^\n]*\n|[^\n]+$", text)


def parses(code: str) -> bool:
    try:
        ast.parse(code)
    except SyntaxError:
        return False
    return True


def _code_part(line: str) -> str:
    """The line without its comment (a `#` outside string literals)."""
    quote = None
    index = 0
    while index < len(line):
        char = line[index]
        if quote is not None:
            if char == "\\":
                index += 2
                continue
            if char == quote:
                quote = None
        elif char in "'\"":
            quote = char
        elif char == "#":
            return line[:index].rstrip()
        index += 1
    return line.rstrip()


class _Scanner:
    """Just enough of Python's tokenizer to know where statements start: bracket depth,
    strings that span lines, backslash continuations."""

    def __init__(self) -> None:
        self.depth = 0
        self.quote: str | None = None  # the open string's quote: ', ", ''' or \"\"\"
        self.continued = False

    def at_statement_start(self) -> bool:
        return self.depth == 0 and self.quote is None and not self.continued

    def feed(self, line: str) -> None:
        index = 0
        comment = False
        while index < len(line):
            char = line[index]
            if self.quote is not None:
                if char == "\\":
                    index += 2
                    continue
                if line.startswith(self.quote, index):
                    index += len(self.quote)
                    self.quote = None
                    continue
                index += 1
                continue
            if char == "#":
                comment = True
                break
            if char in "'\"":
                self.quote = char * 3 if line.startswith(char * 3, index) else char
                index += len(self.quote)
                continue
            if char in "([{":
                self.depth += 1
            elif char in ")]}":
                self.depth = max(0, self.depth - 1)
            index += 1
        ends_with_backslash = not comment and line.endswith("\\")
        if self.quote is not None and len(self.quote) == 1 and not ends_with_backslash:
            self.quote = None  # an unterminated one-line string: the parser will say so
        self.continued = ends_with_backslash and self.quote is None
