"""One file through the pipeline: bytes -> prefilter -> parse -> analyse -> rules -> edits ->
imports -> re-parse check -> bytes. Never raises for bad input: errors come back in the result.

When no rule changed anything the original bytes are the output (LibCST's round trip is not
byte-exact), so files without training code stay byte-identical.
"""

from __future__ import annotations

import ast
import codecs
import io
import tokenize
from dataclasses import dataclass, field

from migrator.findings import Finding
from migrator.prefilter import could_need_migration, triggers  # noqa: F401 - re-exported
from migrator.rule_table import rule_codes  # not rules.catalogue: that imports LibCST


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


def migrate_text(text: str, options: Options = Options()) -> tuple[str | None, list[Finding]]:
    """Migrate source text; (None, findings) when nothing changes. Raises MigrationError."""
    import libcst as cst

    from migrator.analysis import analyse
    from migrator.analysis.placement import PreparePlan, plan_prepare
    from migrator.edits import EditSet, apply_edits
    from migrator.rules import APPLY_ORDER, IMPLIED, RuleContext

    try:
        module = cst.parse_module(text)
    except cst.ParserSyntaxError as error:
        raise MigrationError(_syntax_message(error)) from None
    except RecursionError:
        raise MigrationError("too deeply nested for the parser") from None
    facts = analyse(module)
    findings = list(facts.findings)
    context = RuleContext(
        module=module, facts=facts, plan=PreparePlan(), edits=EditSet(), target=options.target,
        selected=options.rules,
    )  # fmt: skip
    for rule_class in APPLY_ORDER:
        if rule_class.detector and rule_class.code in options.rules:
            rule_class().apply(context)
    if not facts.has_training or any(f.needs_human for f in context.findings):
        return None, _positioned(module, [*findings, *context.findings])
    context.plan = plan_prepare(facts)
    if context.plan.conflict is not None:
        return None, _positioned(module, [*findings, *context.findings, context.plan.conflict])
    for rule_class in APPLY_ORDER:
        if rule_class.detector:
            continue
        if rule_class.code in options.rules or (rule_class.code in IMPLIED and context.needs):
            rule_class().apply(context)
    findings += context.findings
    if context.blocked or context.edits.empty:
        return None, _positioned(module, findings)
    migrated = apply_edits(module, context.edits)
    if context.extra_imports:
        migrated = _add_imports(migrated, context.extra_imports)
    if context.unused_imports:
        migrated = _remove_imports(migrated, context.unused_imports)
    output = migrated.code
    try:
        ast.parse(output)
    except SyntaxError as error:  # a bug in a rule, never the user's fault
        raise RuntimeError(f"internal error: migrated code does not parse ({error})") from None
    return (output if output != text else None), _positioned(module, findings)


def migrate_bytes(data: bytes, path: str, options: Options = Options()) -> FileResult:
    """One file's bytes through the prefilter stages and, if they let it through, LibCST."""
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
        if prefilter.needs_syntax_gate(present):
            screening = prefilter.screen(text, frozenset(present))
            if screening.verdict == prefilter.SKIP:
                result.skipped = True
                return result
            if screening.verdict == prefilter.NOTES:  # LibCST would only report these
                result.findings = screening.notes
                return result
        output, result.findings = migrate_text(text, options)
        if output is not None:
            result.migrated = encode(output, encoding)
    except MigrationError as error:
        result.error = str(error)
    except Exception as error:  # noqa: BLE001 - one bad file must not stop the run
        result.error = f"internal error: {type(error).__name__}: {error}"
    return result


def _add_imports(module, imports):
    from libcst.codemod import CodemodContext
    from libcst.codemod.visitors import AddImportsVisitor

    context = CodemodContext()
    for source, name in imports:
        AddImportsVisitor.add_needed_import(context, source, name)
    return AddImportsVisitor(context).transform_module(module)


def _remove_imports(module, imports):
    from libcst.codemod import CodemodContext
    from libcst.codemod.visitors import RemoveImportsVisitor

    context = CodemodContext()
    for module_name, obj, asname in imports:
        RemoveImportsVisitor.remove_unused_import(context, module_name, obj, asname)
    return RemoveImportsVisitor(context).transform_module(module)


def _positioned(module, findings: list[Finding]) -> list[Finding]:
    pending = [f for f in findings if f.node is not None]
    if pending:
        from migrator.positions import start_positions  # 15x cheaper than PositionProvider

        positions = start_positions(module, [f.node for f in pending])
        for finding in pending:
            position = positions.get(id(finding.node))
            if position is not None:
                finding.line, finding.col = position[0], position[1] + 1
    for finding in findings:
        finding.node = None  # results cross process boundaries; nodes do not pickle cheaply
    return sorted(findings, key=lambda f: (f.line, f.col, f.code))


def _syntax_message(error) -> str:
    message = str(error).strip().splitlines()
    first = message[0] if message else "syntax error"
    return f"cannot parse: {first} (line {error.raw_line}, column {error.raw_column + 1})"
