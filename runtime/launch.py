"""Launching: `migrate launch` over `torch.distributed.run`, and `launch(fn)` over elastic.

Both are thin: torchrun's own parser, rendezvous, agent and failure handling do the work, so
a rank that raises makes the agent stop the others and report that rank's traceback.
torch.distributed.run / elastic are imported only when a launch happens (import cost).
"""

from __future__ import annotations

import os
import signal
import socket
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

    # The forked worker inherits the launcher's Python SIGTERM handler, which runs only
    # between bytecodes: a worker blocked in a rendezvous or collective ignored the agent's
    # stop for 30 s (then SIGKILL). The default action stops it at once.
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    state.forget_inherited_state()
    try:
        result = function(*args)
    except BaseException as error:
        teardown.mark_failed()  # peers are elsewhere: no exit barrier for this rank
        reported = teardown.describe_failure(error) if isinstance(error, Exception) else error
        traceback.print_exc()  # visible at once, not only in the final summary
        sys.stderr.flush()
        teardown.let_launcher_stop_this_rank(error)
        if reported is not error:
            raise reported from error
        raise
    else:
        teardown.announce_left_without_group()
        return result
    finally:
        # forked workers leave through os._exit, so atexit never tears the group down
        state.shut_down_process_group()


def _free_port(host: str) -> int:
    with socket.socket() as probe:
        probe.bind((host, 0))
        return probe.getsockname()[1]


def launch(
    function: Callable,
    args: tuple = (),
    num_processes: int | None = None,
    mixed_precision: str | None = None,
    use_port: str | int | None = None,
    master_addr: str = "127.0.0.1",
    node_rank: int = 0,
    num_nodes: int = 1,
    rdzv_backend: str = "c10d",
    rdzv_endpoint: str = "",
    rdzv_conf: dict | None = None,
    rdzv_id: str | None = None,
    max_restarts: int = 0,
    monitor_interval: float = 0.1,
    log_line_prefix_template: str | None = None,
) -> Any:
    """Runs `function(*args)` on `num_processes` local processes (notebooks, tests); HF's
    `notebook_launcher` arguments.

    Rendezvous: "c10d" (default) or "static" at `rdzv_endpoint`, else `master_addr:use_port`,
    else a free local port (HF's default is the fixed port 29500). `max_restarts` lets
    torch's elastic agent restart all processes after a failure; it checks them every
    `monitor_interval` seconds. Returns this node's return values as a list ordered by local
    rank. A raising rank stops all and raises torch's `ChildFailedError` carrying its
    traceback. With one process on one node the function runs here.
    """
    if num_processes is None:
        num_processes = torch.cuda.device_count() if torch.cuda.is_available() else 1
    if node_rank >= num_nodes:
        raise ValueError(f"node_rank ({node_rank}) must be less than num_nodes ({num_nodes})")
    if rdzv_backend not in ("c10d", "static", "etcd", "etcd-v2"):
        raise ValueError(f"rdzv_backend must be 'c10d' or 'static', not {rdzv_backend!r}")
    if mixed_precision is not None:
        os.environ["ACCELERATE_MIXED_PRECISION"] = str(mixed_precision)
    if num_processes <= 1 and num_nodes == 1:
        return [function(*args)]
    if torch.distributed.is_initialized():
        raise RuntimeError("launch() must be called before any process group exists")
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        raise RuntimeError(
            "launch() forks its workers, and CUDA is already initialised in this process; "
            "restart the notebook and call launch() before any CUDA call"
        )
    from torch.distributed.launcher.api import LaunchConfig, elastic_launch

    rdzv_configs = dict(rdzv_conf or {})
    if not rdzv_endpoint:
        if use_port is not None:
            rdzv_endpoint = f"{master_addr}:{use_port}"
        elif num_nodes > 1:
            raise ValueError("launch() on several nodes needs rdzv_endpoint or use_port")
        elif rdzv_backend == "static":
            rdzv_endpoint = f"{master_addr}:{_free_port(master_addr)}"
        else:
            rdzv_endpoint = "localhost:0"  # c10d picks a free port
    if rdzv_backend == "static":
        rdzv_configs["rank"] = node_rank
    # one node: a fresh id per launch; several: every node must name the same run
    run_id = rdzv_id or (str(uuid.uuid4()) if num_nodes == 1 else "none")
    options = {}
    if log_line_prefix_template is not None:
        options["log_line_prefix_template"] = log_line_prefix_template
    config = LaunchConfig(
        min_nodes=num_nodes,
        max_nodes=num_nodes,
        nproc_per_node=num_processes,
        rdzv_backend=rdzv_backend,
        rdzv_endpoint=rdzv_endpoint,
        rdzv_configs=rdzv_configs,
        run_id=run_id,
        max_restarts=max_restarts,
        monitor_interval=monitor_interval,
        start_method="fork",
        **options,
    )
    results = elastic_launch(config, _run_in_worker)(function, tuple(args))
    return [results[rank] for rank in sorted(results)]


notebook_launcher = launch  # HF Accelerate's name
