"""One file through the pipeline: bytes -> prefilter -> parse (`ast`) -> analyse -> rules ->
text edits -> imports -> re-parse check -> bytes. Never raises for bad input: errors come back
in the result.

When no rule changed anything the original bytes are the output, so files without training
code stay byte-identical.
"""

from __future__ import annotations

import ast
import codecs
import io
import sys
import tokenize
from dataclasses import dataclass, field

from migrator.findings import Finding, left_as_it_is
from migrator.prefilter import could_need_migration, triggers  # noqa: F401 - re-exported
from migrator.rule_table import rule_codes  # the codes, without importing every rule
from migrator.source import quiet_parse


@dataclass(frozen=True)
class Options:
    target: str = "runtime"
    rules: frozenset = frozenset(rule_codes())


@dataclass
class FileResult:
    path: str
    source: bytes
    migrated: bytes | None = None  # None: nothing to change
    findings: list[Finding] = field(default_factory=list)
    error: str | None = None
    skipped: bool = False  # the prefilter decided no rule could apply
    program: str | None = None  # the entry of the program this file was migrated with
    depends_on: list[str] = field(default_factory=list)  # other files its verdict read

    @property
    def changed(self) -> bool:
        return self.migrated is not None and self.migrated != self.source


class MigrationError(Exception):
    """Input we cannot migrate: undecodable, unparsable. The message is the cause."""


def decode(data: bytes) -> tuple[str, str]:
    """(text, encoding) honouring a BOM or a PEP 263 coding cookie."""
    try:
        encoding, _ = tokenize.detect_encoding(io.BytesIO(data).readline)
    except SyntaxError as error:
        raise MigrationError(f"cannot decode: {error}") from None
    try:
        return data.decode(encoding), encoding
    except (UnicodeDecodeError, LookupError) as error:
        raise MigrationError(f"cannot decode as {encoding}: {error}") from None


def encode(text: str, encoding: str) -> bytes:
    if encoding == "utf-8-sig":
        return codecs.BOM_UTF8 + text.encode("utf-8")
    return text.encode(encoding)


def parse(text: str) -> ast.Module:
    """`ast.parse`, quietly (no warnings about the user's escapes); MigrationError if it
    cannot."""
    try:
        return quiet_parse(text)
    except SyntaxError as error:
        raise MigrationError(_syntax_message(error)) from None
    except ValueError as error:
        raise MigrationError(f"cannot parse: {error}") from None
    except (RecursionError, MemoryError):
        raise MigrationError("too deeply nested for the parser") from None


def migrate_text(text: str, options: Options = Options()) -> tuple[str | None, list[Finding]]:
    """Migrate source text; (None, findings) when nothing changes. Raises MigrationError."""
    return migrate_tree(text, parse(text), options)


def migrate_tree(
    text: str, tree: ast.Module, options: Options = Options(), index=None
) -> tuple[str | None, list[Finding]]:
    """`migrate_text` for a module already parsed from `text` (and indexed, if `index`)."""
    from migrator.analysis.roles.on_target import is_on_target
    from migrator.analysis.syntax.index import ModuleIndex
    from migrator.source import Source

    source = index.source if index is not None else Source(text)
    index = index if index is not None else ModuleIndex(tree, source)
    if is_on_target(index):  # already on Accelerate: left alone, a half-migrated step completed
        return _complete_half_migration(text, index, options), []
    output, context, findings = render_migration(text, tree, options, index)
    if output is None:  # a refusal says why, once, and no more of the rewrite not written
        return None, left_as_it_is(findings)
    checked = edit_imports(output, context)
    output = checked[0]
    if checked[1] is None:
        check_parses(output)
    return (output if output != text else None), findings


def render_migration(
    text: str,
    tree: ast.Module,
    options: Options = Options(),
    index=None,
    plain_evaluation=False,
    library=None,
):
    """The analysis and the rules on one parsed module: (the edited text before imports are
    added or retired, or None when nothing is edited; the rule context; the findings, with
    positions; no context for code already on the target, which `migrate_tree` completes on
    its own). `migrate_tree` finishes the text; a program (`migrator/program.py`) splits it
    into its files first and edits each file's imports on its own. `plain_evaluation`: no
    evaluation loader is prepared (each gets a note, which says why: the text given here, or
    PLAIN where it is True): the second try of a migration whose prepared evaluation loaders
    left it unsound, or refused. `library`: the program's modules that are
    imported but not joined (analysis/model/helper_library.py)."""
    from migrator.analysis import analyse
    from migrator.analysis.placement.plan import plan_prepare
    from migrator.analysis.placement.prepare_plan import PreparePlan
    from migrator.analysis.roles.on_target import is_on_target
    from migrator.analysis.syntax.index import ModuleIndex
    from migrator.edits import EditSet
    from migrator.render import Renderer
    from migrator.rules import APPLY_ORDER, IMPLIED, RuleContext
    from migrator.rules.loader_wrappers import leave_listed_batches
    from migrator.soundness import check_output, complete_outputs
    from migrator.soundness.positions import answered, on_input
    from migrator.source import Source

    source = index.source if index is not None else Source(text)
    index = index if index is not None else ModuleIndex(tree, source)
    if is_on_target(index):  # already on Accelerate: a program on it is left alone
        return None, None, []
    facts = analyse(tree, source, index, plain_evaluation=plain_evaluation)
    findings = list(facts.findings)
    context = RuleContext(
        tree=tree, source=source, facts=facts, plan=PreparePlan(), edits=EditSet(),
        target=options.target, selected=options.rules,
    )  # fmt: skip
    if library is not None:
        context.library = library
    for rule_class in APPLY_ORDER:
        if rule_class.detector and rule_class.code in options.rules:
            rule_class().apply(context)
    if not facts.has_training or any(f.needs_human for f in context.findings):
        return None, context, _positioned(source, [*findings, *context.findings])
    context.plan = plan_prepare(facts)
    leave_listed_batches(context)
    if context.plan.conflict is not None:
        conflict = [*findings, *context.findings, context.plan.conflict]
        return None, context, _positioned(source, conflict)
    for rule_class in APPLY_ORDER:
        if rule_class.detector:
            continue
        if rule_class.code in options.rules or (rule_class.code in IMPLIED and context.needs):
            rule_class().apply(context)
    findings += context.findings
    if context.blocked and not plain_evaluation and facts.eval_loops:
        blocking = [f for f in context.findings if f.needs_human]
        if blocking and all(f.plain_evaluation_helps for f in blocking):
            line = getattr(blocking[0].node, "lineno", 0)
            why = (
                "the function that evaluates it is also handed a loader no code here "
                f"prepares (the call at line {line}), and a prepared loader beside a plain "
                "one would not agree; prepare each loader it is handed where it is made, "
                "by hand, to share the evaluation"
            )
            again = render_migration(text, tree, options, index, why, library)
            if again[0] is not None:  # every process evaluates the whole set, noted
                return again
    if context.blocked or context.edits.empty:
        return None, context, _positioned(source, findings)
    output = Renderer(source, facts.index, context.edits).render()
    reduced: list = []  # MIG032's notes on what it reduced
    if "MIG032" in options.rules:  # on the migrated text: what each process computes
        completed, reduced, sums = complete_outputs(output, context)
        reduced = on_input(reduced, text, output)
        findings = answered(findings, tree, sums, text, output)
        output = completed
    checked = on_input(check_output(output, facts), text, output)
    if any(f.needs_human for f in checked):  # SPEC §3b: right, or not made
        if facts.eval_loops and not plain_evaluation:  # its evaluation loaders left plain,
            again = render_migration(text, tree, options, index, True, library)
            if again[0] is not None:  # every process evaluates the whole set, soundly
                return again
        return None, context, [*_positioned(source, findings), *checked]
    return output, context, [*_positioned(source, findings), *reduced, *checked]


def check_parses(output: str) -> None:
    """Migrated code that does not parse is a bug in a rule, never the user's fault."""
    try:
        quiet_parse(output)
    except SyntaxError as error:
        raise RuntimeError(f"internal error: migrated code does not parse ({error})") from None


def _complete_half_migration(text: str, index, options: Options) -> str | None:
    """Code already on the target (analysis/on_target.py): only plain `loss.backward()` calls
    in loops over loaders it prepared become `accelerator.backward(loss)` (MIG005's edit)."""
    from migrator.analysis.roles.on_target import half_migrated_backward
    from migrator.edits import EditSet
    from migrator.render import Renderer
    from migrator.rules.mig005_backward import backward_render

    if "MIG005" not in options.rules:
        return None
    edits = EditSet()
    for site, accelerator in half_migrated_backward(index):
        edits.rewrite(site.node, backward_render(site.node, f"{accelerator}.backward"))
    if edits.empty:
        return None
    output = Renderer(index.source, index, edits).render()
    try:
        quiet_parse(output)
    except SyntaxError as error:  # a bug in a rule, never the user's fault
        raise RuntimeError(f"internal error: migrated code does not parse ({error})") from None
    return output if output != text else None


def edit_imports(output: str, context) -> tuple[str, ast.Module | None]:
    """The imports rules asked for added and retired, on the edited text; with the parse of
    the result when one was made of it (so it need not be checked again)."""
    tree = None
    for wanted, edit in (
        (context.extra_imports, "add"),
        (context.unused_imports, "remove"),
    ):
        if not wanted:
            continue
        from migrator.import_edits import add_module_imports, remove_unused_imports

        try:
            tree = tree or quiet_parse(output)
        except SyntaxError as error:  # a bug in a rule, never the user's fault
            raise RuntimeError(f"internal error: migrated code does not parse ({error})") from None
        if edit == "add":
            edited = add_module_imports(output, [module for module, _ in wanted], tree)
        else:
            edited = remove_unused_imports(output, wanted, tree)
        tree = tree if edited == output else None
        output = edited
    return output, tree


def migrate_bytes(data: bytes, path: str, options: Options = Options()) -> FileResult:
    """One file's bytes through the prefilter stages and, if they let it through, the
    analysis and the rules; the file is parsed once, for both."""
    from migrator import prefilter

    result = FileResult(path=path, source=data)
    if b"\0" in data:
        result.error = "cannot decode: binary file (contains NUL bytes)"
        return result
    try:
        text, encoding = decode(data)  # cheap, so undecodable files are reported everywhere
        present = prefilter.matched_triggers(data, options.rules)
        if present is None:
            result.skipped = True
            return result
        tree = parse(text)
        index = None
        if prefilter.needs_syntax_gate(present):
            if not prefilter.could_step(data, present):
                result.skipped = True
                return result
            from migrator.analysis.syntax.index import ModuleIndex
            from migrator.source import Source

            index = ModuleIndex(tree, Source(text))
            if not prefilter.gate(index, frozenset(present)):
                result.skipped = True
                return result
        index = _with_helper_effects(index, tree, text, path, result.depends_on)
        output, result.findings = migrate_tree(text, tree, options, index)
        if output is not None:
            result.migrated = encode(output, encoding)
    except MigrationError as error:
        result.error = str(error)
    except Exception as error:  # noqa: BLE001 - one bad file must not stop the run
        result.error = f"internal error: {type(error).__name__}: {error}"
    return result


def _positioned(source, findings: list[Finding]) -> list[Finding]:
    for finding in findings:
        node = finding.node
        if node is not None:
            finding.line, finding.col = node.lineno, source.column(node) + 1
        finding.node = None  # results cross process boundaries; nodes do not pickle cheaply
    return sorted(findings, key=lambda f: (f.line, f.col, f.code))


def _syntax_message(error: SyntaxError) -> str:
    message = (error.msg or "syntax error").strip().splitlines()
    first = message[0] if message else "syntax error"
    where = f"(line {error.lineno}, column {error.offset})"
    if first.startswith("f-string") and sys.version_info < (3, 12):
        # quotes or backslashes inside an f-string's braces: PEP 701, Python 3.12's grammar
        return (
            f"cannot parse: {first} {where} with Python {sys.version_info.major}."
            f"{sys.version_info.minor}'s grammar; if it is valid from Python 3.12 on (quotes "
            "inside an f-string's braces, PEP 701), run migrate under Python 3.12 or later"
        )
    return f"cannot parse: {first} {where}"


def _with_helper_effects(index, tree: ast.Module, text: str, path: str, depends_on: list):
    """The file's index, knowing what the project helpers it imports write where every
    process runs them (migrator/program/helper_effects.py), and which draw random numbers
    (helper_draws.py); `path` locates the project, and
    the helper modules read go to `depends_on` (the verdict cache checks them)."""
    if not path or not any(isinstance(n, (ast.Import, ast.ImportFrom)) for n in tree.body):
        return index
    from pathlib import Path

    from migrator.program.helper_draws import helper_draws, helper_random_layers
    from migrator.program.helper_effects import helper_effects

    read: set = set()
    try:
        found = helper_effects(tree, Path(path), read=read)
        draws = helper_draws(tree, Path(path))
        layers = helper_random_layers(tree, Path(path))
    except (OSError, ValueError, RecursionError):
        return index
    depends_on.extend(sorted(str(p) for p in read))
    if not found and not draws and not layers:
        return index
    if index is None:
        from migrator.analysis.syntax.index import ModuleIndex
        from migrator.source import Source

        index = ModuleIndex(tree, Source(text))
    index.imports.helper_effects = found
    index.imports.helper_draws = draws
    index.imports.helper_random_layers = layers
    return index
