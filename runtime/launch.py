"""Launching: `migrate launch` over `torch.distributed.run`, and `launch(fn)` over elastic.

Both are thin: torchrun's own parser, rendezvous, agent and failure handling do the work, so
a rank that raises makes the agent stop the others and report that rank's traceback.
torch.distributed.run / elastic are imported only when a launch happens (import cost).
"""

from __future__ import annotations

import os
import sys
import traceback
import uuid
from collections.abc import Callable
from typing import Any

import torch


def launcher_arguments(
    script: str,
    script_args: list[str],
    *,
    nproc: int,
    nnodes: str,
    node_rank: int,
    rdzv_endpoint: str | None,
) -> list[str]:
    """The `torchrun` argument list for a `migrate launch` command line."""
    arguments = [f"--nproc-per-node={nproc}", f"--nnodes={nnodes}"]
    if rdzv_endpoint:
        arguments += [
            "--rdzv-backend=c10d",
            f"--rdzv-endpoint={rdzv_endpoint}",
            f"--node-rank={node_rank}",
        ]
    elif str(nnodes) in ("1", "1:1"):
        arguments.append("--standalone")  # c10d rendezvous on a free localhost port
    else:
        raise ValueError(f"--nnodes {nnodes} needs --rdzv-endpoint HOST:PORT (multi-node)")
    # "--": the script's own options (even "--nproc") never reach torchrun's parser
    return [*arguments, "--", script, *script_args]


def launch_script(
    script: str,
    script_args: list[str],
    *,
    nproc: int,
    nnodes: str,
    node_rank: int,
    rdzv_endpoint: str | None,
) -> int:
    """Runs `script` on `nproc` processes per node; returns the exit code for the CLI."""
    from torch.distributed.elastic.multiprocessing.errors import ChildFailedError
    from torch.distributed.run import get_args_parser, run

    if nproc < 1:
        print("migrate launch: error: --nproc must be at least 1", file=sys.stderr)
        return 2
    if not os.path.isfile(script):
        print(f"migrate launch: error: {script}: no such file", file=sys.stderr)
        return 2
    try:
        arguments = launcher_arguments(
            script,
            script_args,
            nproc=nproc,
            nnodes=nnodes,
            node_rank=node_rank,
            rdzv_endpoint=rdzv_endpoint,
        )
    except ValueError as error:
        print(f"migrate launch: error: {error}", file=sys.stderr)
        return 2
    try:
        run(get_args_parser().parse_args(arguments))
    except ChildFailedError as error:
        print(error.format_msg(), file=sys.stderr)
        _, failure = error.get_first_failure()
        return failure.exitcode if failure.exitcode > 0 else 1
    return 0


def _run_in_worker(function: Callable, args: tuple) -> Any:
    from runtime import state, teardown

    state.forget_inherited_state()
    try:
        return function(*args)
    except BaseException as error:
        teardown.mark_failed()  # peers are elsewhere: no exit barrier for this rank
        traceback.print_exc()  # visible at once, not only in the final summary
        sys.stderr.flush()
        teardown.let_launcher_stop_this_rank(error)
        raise
    finally:
        # forked workers leave through os._exit, so atexit never tears the group down
        state.shut_down_process_group()


def launch(
    function: Callable,
    args: tuple = (),
    num_processes: int | None = None,
    mixed_precision: str | None = None,
) -> Any:
    """Runs `function(*args)` on `num_processes` local processes (notebooks, tests).

    Returns the return values as a list ordered by rank. A raising rank stops all and raises torch's
    `ChildFailedError` carrying its traceback. With one process the function runs here.
    """
    if num_processes is None:
        num_processes = torch.cuda.device_count() if torch.cuda.is_available() else 1
    if mixed_precision is not None:
        os.environ["ACCELERATE_MIXED_PRECISION"] = mixed_precision
    if num_processes <= 1:
        return [function(*args)]
    if torch.distributed.is_initialized():
        raise RuntimeError("launch() must be called before any process group exists")
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        raise RuntimeError(
            "launch() forks its workers, and CUDA is already initialised in this process; "
            "restart the notebook and call launch() before any CUDA call"
        )
    from torch.distributed.launcher.api import LaunchConfig, elastic_launch

    config = LaunchConfig(
        min_nodes=1,
        max_nodes=1,
        nproc_per_node=num_processes,
        rdzv_backend="c10d",
        rdzv_endpoint="localhost:0",
        run_id=str(uuid.uuid4()),
        max_restarts=0,
        monitor_interval=0.1,
        start_method="fork",
    )
    results = elastic_launch(config, _run_in_worker)(function, tuple(args))
    return [results[rank] for rank in sorted(results)]
