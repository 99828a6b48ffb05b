"""The recorder: runs inside every process of both runs, before the user's script.

It seeds python/numpy/torch identically, turns on deterministic algorithms, records the value
passed to every backward and every optimizer step (torch's global optimizer step hook), stops
the script cleanly after `max_steps` steps, and writes what it saw (see `records`). It also
observes what makes N-process runs differ (dropout, BatchNorm in training mode, the loaders,
random draws while a batch is fetched) so that the parent can name a cause.

The user's code runs with `__name__ == "__main__"`, `__file__` and `sys.argv[0]` naming the
user's file, even when the source executed is the migrated text from a temporary file.
"""

from __future__ import annotations

import gc
import json
import linecache
import math
import os
import random
import sys
import traceback
import types
from array import array
from pathlib import Path

import torch
import torch.nn.functional as F
from torch.optim.optimizer import (
    register_optimizer_step_post_hook,
    register_optimizer_step_pre_hook,
)

from migrator.verify import checkpoints, hooks, liveness, writes
from migrator.verify.capture import Captures
from migrator.verify.records import (
    CONFIG_ENV,
    PARAMS_DATA,
    PARAMS_INITIAL,
    PARAMS_LAYOUT,
    rank_file,
)

MAX_FRAMES = 40
GRADIENT_NUDGE = 8  # rounding units: ~sqrt(n) for a batch sum of n ~ 100 partly cancelling terms


class StopTraining(BaseException):
    """Raised from the optimizer step hook at --max-steps; a BaseException so that a script's
    `except Exception` cannot swallow it."""


class Recorder:
    def __init__(self, config: dict, rank: int) -> None:
        self.config = config
        self.rank = rank
        self.max_steps = config.get("max_steps")
        self.pending: list[float] = []
        self.step_losses: list[float] = []
        self.step_lrs: list = []
        self.backward_calls = 0
        self.optimizers: list = []  # in order of their first step
        self.primary = None  # the first optimizer that steps: its steps are "the" steps
        # id(parameter) -> its value just before its optimizer's first step (rank 0 only)
        self.initial: dict[int, torch.Tensor] = {}
        self.observed = hooks.Observations()
        self.out_dir = Path(config["out_dir"])
        self.heartbeat = liveness.Heartbeat(self.out_dir, rank)
        self.step_log = liveness.StepLog(self.out_dir, rank)
        self.captures = Captures(self.out_dir, rank, self.steps_taken)
        sandbox = config.get("sandbox")
        self.writes = writes.WriteLog(
            Path(sandbox) if sandbox else None, writes.ignored_folders(config), self.steps_taken
        )
        self.saved = checkpoints.SavedContents(self.out_dir, rank)
        self.frames: list[dict] = []  # the traceback that ended the script, innermost last

    def steps_taken(self) -> int:
        return len(self.step_losses)

    def install(self) -> None:
        if self.config.get("device") == "cuda" and not torch.cuda.is_available():
            raise RuntimeError("--device cuda: torch sees no CUDA device in the migrated run")
        self.stack_handle = liveness.dump_stack_on_request(self.out_dir, self.rank)
        self.observed.beat = self.heartbeat.beat
        self.captures.install()
        self.captures.tee.on_line = self.heartbeat.beat
        liveness.watch_collectives(self.heartbeat.beat)
        writes.install(self.writes, self.saved.take)
        seed = int(self.config["seed"])
        random.seed(seed)
        try:
            import numpy

            numpy.random.seed(seed)
        except ImportError:
            pass
        torch.manual_seed(seed)
        torch.use_deterministic_algorithms(True, warn_only=True)
        torch.backends.cudnn.benchmark = False
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False
        original_backward = torch.autograd.backward

        def recording_backward(tensors, *args, **kwargs):
            self.note_backward(tensors)
            if hooks.argument(args, kwargs, 1, "retain_graph", None):
                self.observed.retained_graphs += 1
            return original_backward(tensors, *args, **kwargs)

        torch.autograd.backward = recording_backward
        if self.rank == 0:
            register_optimizer_step_pre_hook(self.note_step_start)
        register_optimizer_step_post_hook(self.note_step)
        if self.config.get("nudge"):
            # the probe's own generator: the script's random stream is left as it is
            self.nudges = torch.Generator().manual_seed(int(self.config["seed"]))
            register_optimizer_step_pre_hook(self.nudge_gradients)
            register_optimizer_step_post_hook(self.nudge_parameters)
        hooks.watch_functional(F, self.observed, no_dropout=bool(self.config.get("no_dropout")))
        hooks.watch_autocast(self.observed)
        hooks.watch_loaders(
            self.observed, seed_shuffle=bool(self.config.get("seed_shuffle")), seed=seed
        )
        if self.config.get("runtime") == "accelerate" and self.config.get("split_batches", True):
            hooks.force_accelerate_split_batches(cpu=self.config.get("device") != "cuda")

    def note_backward(self, tensors) -> None:
        tensor = tensors[0] if isinstance(tensors, (list, tuple)) else tensors
        value = tensor.detach()
        self.pending.append(float(value.double().sum().item()))
        self.backward_calls += 1
        self.observed.note_backward()

    def note_step_start(self, optimizer, args, kwargs) -> None:
        """Snapshots the parameters an optimizer is about to change for the first time: the
        weights training started from (after any DDP broadcast), the reference for how far
        training moved each tensor."""
        for group in optimizer.param_groups:
            for parameter in group["params"]:
                if id(parameter) not in self.initial:
                    self.initial[id(parameter)] = parameter.detach().to("cpu", copy=True)

    def note_step(self, optimizer, args, kwargs) -> None:
        if all(optimizer is not seen for seen in self.optimizers):
            self.optimizers.append(optimizer)
        if self.primary is None:
            self.primary = optimizer
        if optimizer is not self.primary:
            return
        self.observed.note_step()
        self.step_losses.append(sum(self.pending))
        self.pending = []
        lr = optimizer.param_groups[0].get("lr") if optimizer.param_groups else None
        self.step_lrs.append(float(lr) if isinstance(lr, (int, float, torch.Tensor)) else None)
        self.step_log.note(self.step_losses[-1], self.step_lrs[-1])
        if self.max_steps is not None and len(self.step_losses) >= self.max_steps:
            raise StopTraining()

    def nudge_gradients(self, optimizer, args, kwargs) -> None:
        """The rounding probe, before every step: each gradient element moves by
        GRADIENT_NUDGE rounding units of its own size, up or down at random. That is what
        summing in another order does to a gradient: a sum of n terms that partly cancel is
        off by ~eps * sqrt(n) relative (and Adam turns it into much larger updates where the
        gradient is near zero)."""
        with torch.no_grad():
            for group in optimizer.param_groups:
                for parameter in group["params"]:
                    grad = parameter.grad
                    if grad is None or not grad.is_floating_point():
                        continue
                    signs = torch.randint(0, 2, grad.shape, generator=self.nudges) * 2 - 1
                    unit = torch.finfo(grad.dtype).eps * GRADIENT_NUDGE
                    grad.add_(grad * signs.to(grad.device, grad.dtype) * unit)

    def nudge_parameters(self, optimizer, args, kwargs) -> None:
        """The rounding probe, after every step: every parameter moves by one rounding unit
        (up after odd steps, down after even ones, so nothing drifts), as the forward pass on
        other batch shapes rounds differently."""
        towards = math.inf if len(self.step_losses) % 2 else -math.inf
        with torch.no_grad():
            for group in optimizer.param_groups:
                for parameter in group["params"]:
                    if parameter.is_floating_point():
                        limit = torch.full_like(parameter, towards)
                        parameter.copy_(torch.nextafter(parameter, limit))

    def save(self, status: str, error: str | None = None) -> None:
        out = self.out_dir
        writes.flush_open_files()
        self.captures.close()
        record = {
            "rank": self.rank,
            "status": status,
            "error": error,
            "step_losses": self.step_losses,
            "step_lrs": self.step_lrs,
            "backward_calls": self.backward_calls,
            "trailing_losses": self.pending,
            "observed": self.observed.as_dict(),
            "frames": self.frames,
            "writes": self.writes.as_list(),
            "max_quiet_s": self.heartbeat.max_quiet_s,
            "first_beat_s": self.heartbeat.first_beat_s,
        }
        if self.rank == 0:
            self.save_parameters(out)
        temporary = rank_file(out, self.rank).with_suffix(".tmp")
        temporary.write_text(json.dumps(record))
        os.replace(temporary, rank_file(out, self.rank))

    def save_parameters(self, out: Path) -> None:
        names = parameter_names()
        layout, data, initial, seen = [], array("d"), array("d"), set()
        for index, optimizer in enumerate(self.optimizers):
            for group in optimizer.param_groups:
                for position, parameter in enumerate(group["params"]):
                    if id(parameter) in seen:
                        continue
                    seen.add(id(parameter))
                    values = parameter.detach().to("cpu", torch.float64).flatten()
                    name = names.get(id(parameter), f"optimizer{index}.param{position}")
                    layout.append(
                        {"name": name, "shape": list(parameter.shape), "numel": values.numel()}
                    )
                    data.extend(values.tolist())
                    start = self.initial.get(id(parameter))
                    if start is None:  # added after its optimizer's first step: unknown
                        initial.extend([math.nan] * values.numel())
                    else:
                        initial.extend(start.to(torch.float64).flatten().tolist())
        (out / PARAMS_DATA).write_bytes(data.tobytes())
        (out / PARAMS_INITIAL).write_bytes(initial.tobytes())
        (out / PARAMS_LAYOUT).write_text(json.dumps(layout))


def parameter_names() -> dict[int, str]:
    """id(parameter) -> its name in the largest model that holds it (DDP wrappers skipped)."""
    wrapper = torch.nn.parallel.DistributedDataParallel
    # type() rather than isinstance(): some lazy objects warn when asked for __class__
    models = [
        m
        for m in gc.get_objects()
        if issubclass(type(m), torch.nn.Module) and not issubclass(type(m), wrapper)
    ]
    names: dict[int, str] = {}
    for model in sorted(models, key=lambda m: -sum(1 for _ in m.parameters())):
        for name, parameter in model.named_parameters():
            names.setdefault(id(parameter), name)
    return names


def run_script(source_path: str, script_path: str, argv: list[str]) -> None:
    """Executes the source as `__main__` of the user's script (path, argv, sys.path[0])."""
    source = Path(source_path).read_text(encoding="utf-8")
    # tracebacks show the lines executed (the migrated text), not the user's file's
    linecache.cache[script_path] = (len(source), None, source.splitlines(True), script_path)
    code = compile(source, script_path, "exec")
    main = types.ModuleType("__main__")
    main.__file__ = script_path
    main.__builtins__ = __builtins__
    sys.modules["__main__"] = main
    sys.argv = [script_path, *argv]
    sys.path[0] = str(Path(script_path).resolve().parent)
    exec(code, main.__dict__)  # noqa: S102 -- running the user's script is the point


def frames_of(error: BaseException) -> list[dict]:
    """The traceback's frames below the recorder (the script's and what it called)."""
    frames = traceback.extract_tb(error.__traceback__)
    start = next((i for i, f in enumerate(frames) if f.name == "<module>"), 0)
    return [
        {"file": f.filename, "line": f.lineno, "function": f.name, "code": (f.line or "")[:200]}
        for f in frames[start:]
    ][-MAX_FRAMES:]


def _finish(recorder: Recorder, status: str, code: int, error: str | None = None) -> None:
    try:
        recorder.save(status, error)
    except BaseException:  # noqa: BLE001 -- the parent reports the missing record
        traceback.print_exc()
        code = code or 1
    sys.stdout.flush()
    sys.stderr.flush()
    world = liveness.world_size()
    if code == 0 and world > 1:
        # as a real run waits in the exit barrier: a peer stuck in a collective stays stuck
        liveness.wait_for_other_ranks(recorder.out_dir, recorder.rank, world)
    # os._exit: no atexit teardown of a process group (gloo aborts ~1 run in 4 at exit)
    os._exit(code)


def main() -> None:
    config = json.loads(Path(os.environ[CONFIG_ENV]).read_text())
    rank = int(os.environ.get("RANK", "0"))
    pid_dir = Path(config["pid_dir"])
    (pid_dir / f"{os.getpid()}").write_text(str(rank))
    recorder = Recorder(config, rank)
    try:
        recorder.install()
        run_script(config["source_path"], config["script_path"], config["argv"])
    except StopTraining:
        _finish(recorder, "stopped", 0)
    except SystemExit as exit_:
        code = exit_.code
        if code is None or code == 0:
            _finish(recorder, "completed", 0)
        if not isinstance(code, int):
            print(code, file=sys.stderr)
            code = 1
        _finish(recorder, "exited", code, f"exit code {code}")
    except BaseException as error:  # noqa: BLE001 -- any end of the script is recorded
        traceback.print_exc()
        recorder.frames = frames_of(error)
        _finish(recorder, "crashed", 1, f"{type(error).__name__}: {error}"[:300])
    _finish(recorder, "completed", 0)
