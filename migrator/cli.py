"""The `migrate` console script.

Plain invocations of the default command (`migrate --check --force-exclude train.py`, what
pre-commit runs) are read by `default_args.py` and run without importing typer; everything
else goes to the typer app (`migrator/app.py`). Both end the same way: the same request, the
same exit codes, Ctrl-C and a closed pipe handled as typer handles them.
"""

from __future__ import annotations

import errno
import gc
import os
import sys

from migrator.default_args import read_default_args, run_request
from migrator.exit_codes import EXIT_INTERRUPTED


def run() -> None:
    """The console script and `python -m migrator`: `main()`, then, when the interpreter's
    shutdown has nothing left to do (no atexit callback, no other thread), an exit without it:
    tearing down the ~300 modules a run imported costs about a tenth of a pre-commit run (mypy
    exits so too). Callers of `main()` in-process get their SystemExit as before."""
    try:
        main()
    except SystemExit as done:
        code = 0 if done.code is None else done.code
        if not isinstance(code, int) or not _nothing_left_at_exit():
            raise
        try:
            sys.stdout.flush()
            sys.stderr.flush()
        except (OSError, ValueError):
            raise done from None  # a closed pipe: the interpreter reports it, as it always did
        os._exit(code)


def main() -> None:
    collecting = gc.isenabled()
    gc.disable()  # start-up allocates what lives as long as the process: nothing to collect
    try:
        request = read_default_args(sys.argv[1:])  # imports the command, report and engine
    finally:
        gc.freeze()  # and later collections need not scan it again
        if collecting:
            gc.enable()
    if request is None:
        from migrator.app import main as typer_main

        typer_main()
        return
    try:
        code = run_request(request)
    except KeyboardInterrupt:
        code = EXIT_INTERRUPTED  # typer: silently, the shell's code
    except OSError as error:
        if error.errno != errno.EPIPE:
            _typer_traceback(error)
            raise
        _pacify_closed_pipes()
        code = 1  # typer: a reader that went away (`migrate --diff | head`) exits 1
    except Exception as error:
        _typer_traceback(error)
        raise
    sys.exit(code)


def _nothing_left_at_exit() -> bool:
    import atexit

    threading = sys.modules.get("threading")
    if threading is not None and threading.active_count() > 1:
        return False  # the interpreter would wait for them
    callbacks = getattr(atexit, "_ncallbacks", None)  # CPython's; elsewhere exit as usual
    return callbacks is not None and callbacks() == 0


def _pacify_closed_pipes() -> None:
    """As typer: later flushes of the closed stream must not raise again at exit."""
    from typer._click.utils import PacifyFlushWrapper

    sys.stdout = PacifyFlushWrapper(sys.stdout)
    sys.stderr = PacifyFlushWrapper(sys.stderr)


def _typer_traceback(error: Exception) -> None:
    """An internal error prints the traceback typer's app would print."""
    try:
        from typer.main import (
            DeveloperExceptionConfig,
            _typer_developer_exception_attr_name,
            except_hook,
        )

        from migrator.app import app
    except ImportError:  # another typer: the plain traceback
        return
    sys.excepthook = except_hook
    config = DeveloperExceptionConfig(
        pretty_exceptions_enable=app.pretty_exceptions_enable,
        pretty_exceptions_show_locals=app.pretty_exceptions_show_locals,
        pretty_exceptions_short=app.pretty_exceptions_short,
    )
    setattr(error, _typer_developer_exception_attr_name, config)


if __name__ == "__main__":
    run()
