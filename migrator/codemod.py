"""The migration as a LibCST codemod, for LibCST pipelines and `python -m libcst.tool codemod`.

An adapter, not a second engine: the module's code goes through the same engine `migrate`
runs (`engine.migrate_bytes`: prefilter, `ast` analysis, text edits over `ast` spans), and the
migrated text is parsed back into a `cst.Module`; a module the migration leaves alone is
not re-parsed. Findings become codemod warnings (`context.warnings`,
rendered as `migrate` prints them) and are kept, structured, in
`context.scratch[FINDINGS_KEY]`. docs/codemod.md says how to run and compose it.

Only this module imports LibCST (an optional extra: `pip install 'accelerate-migrator[codemod]'`);
`import migrator` and the `migrate` command never do.
"""

from __future__ import annotations

import argparse

import libcst as cst
from libcst.codemod import CodemodContext, SkipFile, VisitorBasedCodemodCommand

from migrator.findings import Finding

FINDINGS_KEY = "migrator.findings"  # context.scratch: the last module's findings
TARGETS = ("runtime", "accelerate")


class MigrationFailed(RuntimeError):
    """The engine failed on this module (a bug in a rule): the codemod run reports it."""


class MigrateToAccelerate(VisitorBasedCodemodCommand):
    """A `Codemod` (use `transform_module`) and a command for `libcst.tool`; as a visitor it
    acts once, when it leaves the module, so it composes with other transformers too."""

    DESCRIPTION = (
        "Migrate a PyTorch training script to the Accelerate API (accelerate-migrator). "
        "Untouched bytes are kept; the output is never reformatted."
    )

    @staticmethod
    def add_args(arg_parser: argparse.ArgumentParser) -> None:
        arg_parser.add_argument(
            "--target",
            choices=TARGETS,
            default=None,
            help="Which Accelerator import the output uses (default: [tool.migrate], else runtime).",
        )
        arg_parser.add_argument(
            "--select", type=_rule_codes, default=None, help="Rule codes or prefixes to apply."
        )
        arg_parser.add_argument(
            "--ignore", type=_rule_codes, default=None, help="Rule codes or prefixes to skip."
        )
        # libcst.tool pipes changed files through black by default; a migration keeps every
        # untouched byte (as `migrate` does), so reformatting the whole file is opt-in: never.
        arg_parser.set_defaults(no_format=True)

    def __init__(
        self,
        context: CodemodContext,
        target: str | None = None,
        select: str | None = None,
        ignore: str | None = None,
    ) -> None:
        super().__init__(context)
        if target is not None and target not in TARGETS:
            raise ValueError(f"target must be one of {', '.join(TARGETS)}, not {target!r}")
        self.target, self.select, self.ignore = target, select, ignore
        if select is not None or ignore is not None:
            _selection(select, ignore)  # a bad code fails here, not once per file

    def leave_Module(self, original_node: cst.Module, updated_node: cst.Module) -> cst.Module:
        return self.migrate(updated_node)

    def migrate(self, module: cst.Module) -> cst.Module:
        """`module` migrated, or `module` itself when nothing changes. SkipFile for code the
        engine cannot read (a syntax this Python's `ast` lacks); MigrationFailed for a bug."""
        from migrator.engine import migrate_bytes

        path = self.context.filename or "<module>"
        result = migrate_bytes(module.bytes, path, self._options())
        if result.error is not None:
            if result.error.startswith("internal error"):
                raise MigrationFailed(f"{path}: {result.error}")
            raise SkipFile(result.error)
        self.context.scratch[FINDINGS_KEY] = list(result.findings)
        for finding in result.findings:
            self.warn(finding.render(path))
        if not result.changed:
            return module
        return cst.parse_module(
            result.migrated, config=cst.PartialParserConfig(encoding=module.encoding)
        )

    def _options(self):
        """The options `migrate` would use for this file: the arguments given, else the
        `[tool.migrate]` table of its project (of the current directory without a file)."""
        from migrator.config import load_config
        from migrator.engine import Options

        config = load_config([self.context.filename or "."])
        rules = _selection(
            self.select if self.select is not None else config.select,
            self.ignore if self.ignore is not None else config.ignore,
        )
        return Options(target=self.target or config.target or "runtime", rules=rules)


def findings_of(context: CodemodContext) -> list[Finding]:
    """The findings of the module the codemod last transformed in `context`."""
    return list(context.scratch.get(FINDINGS_KEY, []))


def _selection(select: str | None, ignore: str | None) -> frozenset[str]:
    from migrator.selection import parse_selection

    return parse_selection(select, ignore)


def _rule_codes(value: str) -> str:
    """argparse type: codes or prefixes that exist (a typo is a usage error, as in `migrate`)."""
    from migrator.selection import SelectionError

    try:
        _selection(value, None)
    except SelectionError as error:
        raise argparse.ArgumentTypeError(str(error)) from None
    return value
