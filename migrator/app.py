"""The `migrate` command line as a typer app: every command, option and help text; argument
parsing and exit codes only.

`migrate PATHS` (the default command) migrates files; `migrate rules`, `migrate launch` and
`migrate verify` are subcommands. Heavy modules (the analysis, torch) are imported inside the commands
that need them so that `migrate --help` and `migrate rules` start fast and never import torch.
The console script enters through `migrator/cli.py`, which reads the plain default-command
invocations itself (`default_args.py`) and hands everything else to this app.
"""

from __future__ import annotations

from enum import Enum
from pathlib import Path

import typer
from typer.core import TyperGroup

from migrator import __version__
from migrator.exit_codes import EXIT_ERROR

DEFAULT_COMMAND = "fix"


class DefaultCommandGroup(TyperGroup):
    """Route `migrate [OPTIONS] PATHS` to the default command, as black and ruff users expect."""

    def parse_args(self, ctx, args):  # type: ignore[override]
        group_only = {"--help", "-h", "--version", "--install-completion", "--show-completion"}
        if not args or (args[0] not in self.commands and args[0] not in group_only):
            args = [DEFAULT_COMMAND, *args]
        return super().parse_args(ctx, args)

    def list_commands(self, ctx):  # the default command is documented on the group itself
        return [name for name in super().list_commands(ctx) if name != DEFAULT_COMMAND]


app = typer.Typer(
    cls=DefaultCommandGroup,
    add_completion=False,
    no_args_is_help=False,
    context_settings={"help_option_names": ["-h", "--help"]},
    help=(
        "Migrate PyTorch training scripts to the Accelerate API.\n\n"
        "  migrate [PATHS]... [--diff | --check | --write]   (default: --diff)\n\n"
        "Run `migrate fix --help` for every option of the default command."
    ),
)


class Mode(str, Enum):
    diff = "diff"
    check = "check"
    write = "write"


class Target(str, Enum):
    runtime = "runtime"
    accelerate = "accelerate"


class OutputFormat(str, Enum):
    text = "text"
    json = "json"


def _version_callback(value: bool) -> None:
    if value:
        typer.echo(f"migrate {__version__}")
        raise typer.Exit(0)


@app.callback()
def _group(
    version: bool = typer.Option(
        False, "--version", callback=_version_callback, is_eager=True, help="Show the version."
    ),
) -> None:
    """Migrate PyTorch training scripts to the Accelerate API."""


@app.command(DEFAULT_COMMAND, help="Migrate files (the default command: `migrate PATHS`).")
def fix_command(
    paths: list[str] = typer.Argument(None, help="Files or directories; `-` reads stdin."),
    diff: bool = typer.Option(False, "--diff", help="Print a unified diff (the default)."),
    check: bool = typer.Option(
        False, "--check", help="Write nothing; list files that would change."
    ),
    write: bool = typer.Option(False, "--write", help="Rewrite files in place, atomically."),
    target: Target | None = typer.Option(
        None, "--target", help="Which Accelerator import the output uses (default runtime)."
    ),
    select: str | None = typer.Option(
        None, "--select", help="Comma-separated rule codes or prefixes to apply (default ALL)."
    ),
    ignore: str | None = typer.Option(
        None, "--ignore", help="Comma-separated rule codes or prefixes to skip."
    ),
    exclude: list[str] | None = typer.Option(
        None, "--exclude", help="Glob to skip (gitignore style); replaces the default excludes."
    ),
    extend_exclude: list[str] | None = typer.Option(
        None, "--extend-exclude", help="Glob to skip, in addition to the default excludes."
    ),
    force_exclude: bool = typer.Option(
        False, "--force-exclude", help="Apply excludes and .gitignore to files named explicitly."
    ),
    jobs: int | None = typer.Option(
        None, "--jobs", "-j", min=1, help="Worker processes (default: the CPU count)."
    ),
    stdin_filename: str | None = typer.Option(
        None, "--stdin-filename", help="The name of the file read from stdin, for messages."
    ),
    output_format: OutputFormat = typer.Option(
        OutputFormat.text, "--format", help="text, or json on stdout (per-file results)."
    ),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="Only errors and findings on stderr."),
    no_cache: bool = typer.Option(False, "--no-cache", help="Neither read nor write the cache."),
    cache_dir: str | None = typer.Option(
        None,
        "--cache-dir",
        help="Cache directory (default: $MIGRATE_CACHE_DIR, else .migrate_cache at the root).",
    ),
) -> None:
    from migrator.command import FixRequest
    from migrator.default_args import globs, run_request

    chosen = [name for name, flag in (("diff", diff), ("check", check), ("write", write)) if flag]
    if len(chosen) > 1:
        _usage_error("--diff, --check and --write are mutually exclusive")
    request = FixRequest(
        paths=list(paths or []),
        mode=Mode(chosen[0]).value if chosen else None,
        target=target.value if target is not None else None,
        select=select,
        ignore=ignore,
        stdin_filename=stdin_filename,
        output_format=output_format.value,
        quiet=quiet,
        exclude=globs(exclude) if exclude else None,
        extend_exclude=globs(extend_exclude or []),
        force_exclude=force_exclude,
        jobs=jobs,
        no_cache=no_cache,
        cache_dir=cache_dir,
    )
    raise typer.Exit(run_request(request))


@app.command("rules", help="List the rule codes, names and one-line descriptions.")
def rules_command() -> None:
    from migrator.report import print_rules_table

    print_rules_table()


@app.command(
    "launch",
    help="Run SCRIPT on N processes (a thin layer over torch.distributed.run).",
    # everything after SCRIPT belongs to the script, even options that look like ours
    context_settings={
        "allow_extra_args": True,
        "ignore_unknown_options": True,
        "allow_interspersed_args": False,
    },
)
def launch_command(
    ctx: typer.Context,
    script: Path = typer.Argument(..., help="The training script to run."),
    nproc: int = typer.Option(1, "--nproc", "--nproc-per-node", help="Processes per node."),
    nnodes: str = typer.Option("1", "--nnodes", help="Number of nodes, or MIN:MAX for elastic."),
    node_rank: int = typer.Option(0, "--node-rank", help="This node's rank (static rendezvous)."),
    rdzv_endpoint: str | None = typer.Option(
        None, "--rdzv-endpoint", help="HOST:PORT of the rendezvous (multi-node)."
    ),
) -> None:
    try:
        from runtime.launch import launch_script
    except ImportError as error:  # torch is an optional extra
        typer.echo(
            f"migrate launch: error: needs torch ({error}); pip install 'accelerate-migrator[runtime]'",
            err=True,
        )
        raise typer.Exit(EXIT_ERROR)
    raise typer.Exit(
        launch_script(
            str(script),
            list(ctx.args),
            nproc=nproc,
            nnodes=nnodes,
            node_rank=node_rank,
            rdzv_endpoint=rdzv_endpoint,
        )
    )


class Device(str, Enum):
    cpu = "cpu"
    cuda = "cuda"


@app.command(
    "verify",
    help="Run SCRIPT and its migration under a recorder and compare the training they do, "
    "what they print and write, and how they end.\n\n"
    "Exit 0 EQUIVALENT, 1 DIVERGED, 2 NOT COMPARABLE or could not run. "
    "Script arguments go after `--`.",
    context_settings={"allow_extra_args": True, "ignore_unknown_options": True},
)
def verify_command(
    ctx: typer.Context,
    script: Path = typer.Argument(..., help="The original (un-migrated) training script."),
    nproc: int = typer.Option(2, "--nproc", help="Processes for the migrated run."),
    device: Device = typer.Option(
        Device.cpu, "--device", help="Where the migrated run trains (the original: CPU)."
    ),
    max_steps: int | None = typer.Option(
        None, "--max-steps", help="Stop both runs after N optimizer steps."
    ),
    rtol: float | None = typer.Option(
        None, "--rtol", help="Relative tolerance (default 1e-5 on CPU, 1e-3 on CUDA)."
    ),
    atol: float | None = typer.Option(
        None, "--atol", help="Absolute tolerance (default 1e-6 on CPU, 1e-5 on CUDA)."
    ),
    runtime: Target | None = typer.Option(
        None,
        "--runtime",
        help="Run the migration on our runtime or HF Accelerate (default: runtime; with "
        "--against, the one the migrated program imports).",
    ),
    timeout: float = typer.Option(600.0, "--timeout", help="Seconds for everything."),
    output_format: OutputFormat = typer.Option(
        OutputFormat.text, "--format", help="text (table), or json on stdout."
    ),
    no_dropout: bool = typer.Option(
        False, "--no-dropout", help="Turn dropout off in both runs (compare anyway)."
    ),
    against: Path | None = typer.Option(
        None,
        "--against",
        help="Judge this migration (a file, or a folder with the migrated program in the "
        "original's layout) made elsewhere, instead of migrating SCRIPT.",
    ),
) -> None:
    from migrator.verify.orchestrate import VerifyRequest, run_verify

    raise typer.Exit(
        run_verify(
            VerifyRequest(
                script=str(script),
                script_args=list(ctx.args),
                nproc=nproc,
                device=device.value,
                runtime=runtime.value if runtime is not None else None,
                max_steps=max_steps,
                rtol=rtol,
                atol=atol,
                timeout=timeout,
                output_format=output_format.value,
                no_dropout=no_dropout,
                against=str(against) if against is not None else None,
            )
        )
    )


def _usage_error(message: str) -> None:
    typer.echo(f"migrate: error: {message}", err=True)
    raise typer.Exit(EXIT_ERROR)


def main() -> None:
    app(prog_name="migrate")
