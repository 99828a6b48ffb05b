"""MIG030 on `logging`: `logging.basicConfig(level=logging.INFO)` (or `logger.setLevel(...)` of
a logger the program gets) run on every process makes every process show every info line: N
copies of each, as `print` would without `accelerator.print`. The level holds on the main
process of each machine (where `accelerator.print` prints) and the others keep warnings and
errors only:

    logging.basicConfig(level=logging.INFO if accelerator.is_local_main_process else logging.WARNING)

(`PartialState().is_local_main_process` where logging is set up on import, so the Accelerator
stays where it is made.) A level of WARNING or above (or none) already shows what every
process must show, and is left; so is a configuration only the main process runs.
"""

from __future__ import annotations

import ast

from migrator.analysis.catalogue import effects
from migrator.rules.base import RuleContext

QUIET = {"WARNING", "WARN", "ERROR", "CRITICAL", "FATAL"}
QUIET_NUMBERS = 30  # logging.WARNING


def quiet_other_processes(context: RuleContext, scopes) -> None:
    imports = context.facts.index.imports
    logging_name = next(
        (local for local, full in imports.aliases.items() if full == "logging"), None
    )
    if logging_name is None:
        return  # `from logging import ...` only: no name to spell the quiet level with
    loggers = _loggers(context, imports)
    for scope in scopes:
        for site in scope.calls:
            qualified = imports.qualify(site.node.func) or ""
            if qualified == "logging.basicConfig":
                if effects.effect_of(site.node, imports, effects.values_in(scope)) is not None:
                    continue  # a log file: MIG030 runs it on the main process alone
                level = next((k.value for k in site.node.keywords if k.arg == "level"), None)
            elif site.method == "setLevel" and _named(site.receiver) in loggers:
                level = site.node.args[0] if len(site.node.args) == 1 else None
            else:
                continue
            if level is None or _quiet(level, imports):
                continue
            if not context.processes.runs_on_every_process(site.statement):
                continue
            _hold_on_main(context, site, level, logging_name)


def _hold_on_main(context: RuleContext, site, level: ast.expr, logging_name: str) -> None:
    def held(flag: str):
        return lambda text, _r: f"{text} if {flag} else {logging_name}.WARNING"

    if site.scope.kind == "module":  # set up on import: the Accelerator stays where it is made
        context.edits.replace(level, held(context.state_expr("is_local_main_process")))
        return
    context.edits.replace(level, held(context.accelerator_expr("is_local_main_process")))

    def fallback() -> None:  # no accelerator where logging is set up: the process-wide state's
        context.edits.cancel(level)
        context.edits.replace(level, held(context.state_expr("is_local_main_process")))

    context.need_accelerator_at(site.statement, fallback=fallback)


def _loggers(context: RuleContext, imports) -> set[str]:
    """Names bound to `logging.getLogger(...)`."""
    found = set()
    for site in context.facts.index.calls():
        if (imports.qualify(site.node.func) or "") != "logging.getLogger":
            continue
        small = site.small
        if isinstance(small, ast.Assign) and small.value is site.node:
            found.update(t.id for t in small.targets if isinstance(t, ast.Name))
    return found


def _named(expr: ast.expr | None) -> str | None:
    return expr.id if isinstance(expr, ast.Name) else None


def _quiet(level: ast.expr, imports) -> bool:
    """WARNING or above: `logging.WARNING`, `"ERROR"`, `40`."""
    if isinstance(level, ast.Constant):
        if isinstance(level.value, str):
            return level.value.upper() in QUIET
        return isinstance(level.value, int) and level.value >= QUIET_NUMBERS
    qualified = imports.qualify(level) or ""
    return qualified.startswith("logging.") and qualified.split(".", 1)[1] in QUIET
