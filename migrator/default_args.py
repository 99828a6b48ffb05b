"""The default command's arguments read without typer, for the invocations pre-commit makes.

`migrate --check --force-exclude train.py` must start fast, and importing typer (and the click
it carries) costs about a third of such a run. This reads the plain forms of the default
command: its own options (`--opt value`, `--opt=value`, `-q`, `-j N`), paths, `-` and `--`.
Anything else (help, subcommands, unknown or clustered options, a value typer would reject,
two modes) returns None and goes to the typer app (`migrator/app.py`), which gives the same
request or the same error it always did (tests/test_default_args.py holds both to that).
"""

from __future__ import annotations

import os
import sys

from migrator.exit_codes import EXIT_INTERRUPTED

DEFAULT_COMMAND = "fix"
OTHER_COMMANDS = frozenset({"rules", "launch", "verify"})
MODES = ("diff", "check", "write")
# The default command's options as app.py declares them: {option: its parameter's name}.
FLAGS = {
    "--diff": "diff",
    "--check": "check",
    "--write": "write",
    "--force-exclude": "force_exclude",
    "--quiet": "quiet",
    "-q": "quiet",
    "--no-cache": "no_cache",
}
VALUES = {
    "--target": "target",
    "--select": "select",
    "--ignore": "ignore",
    "--exclude": "exclude",
    "--extend-exclude": "extend_exclude",
    "--jobs": "jobs",
    "-j": "jobs",
    "--stdin-filename": "stdin_filename",
    "--format": "output_format",
    "--cache-dir": "cache_dir",
}
REPEATABLE = frozenset({"exclude", "extend_exclude"})
CHOICES = {"target": ("runtime", "accelerate"), "output_format": ("text", "json")}
COMPLETION_VARIABLE = "_MIGRATE_COMPLETE"  # click's shell completion: typer's business
INTERRUPTED = "migrate: interrupted; files not yet written were left as they were"


def read_default_args(argv: list[str]):
    """The FixRequest typer would build from `argv` (what follows `migrate`), or None when
    this is not a plain invocation of the default command."""
    if not argv or os.name == "nt" or COMPLETION_VARIABLE in os.environ:
        return None  # typer: the default command with nothing, glob expansion, completion
    if argv[0] == DEFAULT_COMMAND:
        argv = argv[1:]
    elif argv[0] in OTHER_COMMANDS:
        return None
    values: dict[str, object] = {}
    paths: list[str] = []
    tokens = iter(argv)
    for token in tokens:
        if token == "--":
            paths.extend(tokens)  # click: everything after `--` is an argument
            break
        if token[:1] != "-" or token == "-":
            paths.append(token)
            continue
        name, equals, attached = token.partition("=")
        if not token.startswith("--"):
            name, equals = token, ""  # a short option's `=` is part of its value in click
        if name in FLAGS and not equals:
            values[FLAGS[name]] = True
            continue
        if name not in VALUES:
            return None
        value = attached if equals else next(tokens, None)
        if value is None:
            return None  # click: "requires an argument"
        key = VALUES[name]
        if key in REPEATABLE:
            values.setdefault(key, []).append(value)  # type: ignore[union-attr]
        else:
            values[key] = value
    modes = [mode for mode in MODES if values.pop(mode, False)]
    if len(modes) > 1 or not _valid(values):
        return None  # typer's error message
    from migrator.command import FixRequest

    exclude, extend_exclude = values.pop("exclude", None), values.pop("extend_exclude", [])
    jobs = values.pop("jobs", None)
    return FixRequest(
        paths=paths,
        mode=modes[0] if modes else None,
        exclude=globs(exclude) if exclude else None,
        extend_exclude=globs(extend_exclude),
        jobs=int(jobs) if jobs is not None else None,
        **values,
    )


def _valid(values: dict[str, object]) -> bool:
    for key, choices in CHOICES.items():
        if key in values and values[key] not in choices:
            return False
    jobs = values.get("jobs")
    # click's int() would also take " 4", "+4" or "1_0": those go to typer
    return jobs is None or (jobs.isascii() and jobs.isdigit() and int(jobs) >= 1)


def globs(values: list[str]) -> list[str]:
    """`--exclude a,b --exclude c` -> [a, b, c]."""
    return [glob.strip() for value in values for glob in value.split(",") if glob.strip()]


def run_request(request) -> int:
    """The default command's work and exit code; Ctrl-C says what it left as it was."""
    from migrator.command import run_fix

    try:
        return run_fix(request)
    except KeyboardInterrupt:
        sys.stderr.write(INTERRUPTED + "\n")  # as typer.echo(..., err=True)
        sys.stderr.flush()
        return EXIT_INTERRUPTED
