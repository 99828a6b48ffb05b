"""Records what each process of an acceptance run writes and prints (loaded by `site` at start).

Active only when ACCEPTANCE_AUDIT_DIR is set: every process (launcher, ranks, spawned children)
appends JSON lines to `<dir>/audit.<pid>.jsonl` — file opens for writing, renames, removals,
directory creations (with `exist_ok`) and `torch.save` paths (written from C++, so no audit event)
— and copies its stdout to `<dir>/stdout.<pid>.txt`. The rank is the process's RANK variable.
Paths are recorded as given; the runner resolves them against the run's folder.
"""

import json
import os
import sys
import time

_AUDIT_DIR = os.environ.get("ACCEPTANCE_AUDIT_DIR")
_WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_APPEND | os.O_TRUNC
_MKDIR_DELAY_S = 1.0  # rank 0 creates folders late, so a racing rank's `if not exists` sees none


def _install(audit_dir: str) -> None:
    pid = os.getpid()
    rank = os.environ.get("RANK")
    world = int(os.environ.get("WORLD_SIZE", "1"))
    log = open(os.path.join(audit_dir, f"audit.{pid}.jsonl"), "a", buffering=1)  # noqa: SIM115
    busy = [False]

    def record(kind, path, **extra):
        if busy[0]:
            return
        busy[0] = True
        try:
            if isinstance(path, bytes):
                path = os.fsdecode(path)
            if not isinstance(path, str):
                return
            entry = {"kind": kind, "path": os.path.abspath(path), "rank": rank, "pid": pid}
            log.write(json.dumps({**entry, **extra}) + "\n")
        finally:
            busy[0] = False

    def hook(event, args):
        if event == "open":
            path, mode, flags = args
            writing = (mode is not None and any(c in str(mode) for c in "wax+")) or (
                mode is None and isinstance(flags, int) and flags & _WRITE_FLAGS
            )
            if writing and not isinstance(path, int):
                record("write", path)
        elif event in ("os.rename", "shutil.move", "shutil.copyfile"):
            record("write", args[1])
        elif event == "os.remove":
            record("remove", args[0])

    sys.addaudithook(hook)

    real_mkdir = os.mkdir
    real_makedirs = os.makedirs

    tolerant = [0]  # > 0 while inside os.makedirs(..., exist_ok=True)

    def makedirs(name, mode=0o777, exist_ok=False):
        tolerant[0] += bool(exist_ok)
        try:
            return real_makedirs(name, mode, exist_ok)
        finally:
            tolerant[0] -= bool(exist_ok)

    def mkdir(path, mode=0o777, *, dir_fd=None):
        target = os.path.abspath(os.fspath(path))
        inside_run = target.startswith(os.getcwd() + os.sep)
        if world > 1 and rank == "0" and inside_run and not os.path.isdir(target):
            time.sleep(_MKDIR_DELAY_S)
        record("mkdir", target, exist_ok=tolerant[0] > 0)
        return real_mkdir(path, mode, dir_fd=dir_fd)

    os.mkdir = mkdir
    os.makedirs = makedirs
    _watch_torch_save(record)
    _tee_stdout(audit_dir, pid)


def _watch_torch_save(record) -> None:
    """Wraps torch.save once torch is imported (importing it here would slow every process)."""
    import importlib.abc

    class TorchSaveWatcher(importlib.abc.MetaPathFinder):
        def find_spec(self, fullname, path=None, target=None):
            if fullname != "torch":
                return None
            sys.meta_path.remove(self)
            import importlib.util

            spec = importlib.util.find_spec("torch")
            if spec is None or spec.loader is None:
                return spec
            real_exec = spec.loader.exec_module

            def exec_module(module):
                real_exec(module)
                _wrap_save(module, record)

            spec.loader.exec_module = exec_module
            return spec

    sys.meta_path.insert(0, TorchSaveWatcher())


def _wrap_save(torch, record) -> None:
    _count_model_rows(torch, record)
    real_save = torch.save

    def save(obj, f, *args, **kwargs):
        if isinstance(f, (str, bytes, os.PathLike)):
            record("torch.save", os.fspath(f))
        return real_save(obj, f, *args, **kwargs)

    torch.save = save
    torch.serialization.save = save


def _count_model_rows(torch, record) -> None:
    """Counts the samples (first dimension of the first tensor argument) that go through the
    outermost calls of modules with parameters: an unsharded loader, or a model run on gathered
    inputs, shows as each process doing the whole work."""
    import atexit
    import threading

    module_class = torch.nn.Module
    real_call = module_class.__call__
    state = threading.local()
    rows = [0]
    has_parameters: dict[int, bool] = {}

    def first_rows(args, kwargs):
        for value in (*args, *kwargs.values()):
            if isinstance(value, torch.Tensor):
                return value.shape[0] if value.dim() else 1
        return 0

    def counted_call(self, *args, **kwargs):
        depth = getattr(state, "depth", 0)
        if depth == 0:
            key = id(self)
            if key not in has_parameters:
                has_parameters[key] = next(self.parameters(), None) is not None
            if has_parameters[key]:
                rows[0] += first_rows(args, kwargs)
        state.depth = depth + 1
        try:
            return real_call(self, *args, **kwargs)
        finally:
            state.depth = depth

    module_class.__call__ = counted_call
    atexit.register(lambda: record("rows", ".", rows=rows[0]))


class _Tee:
    def __init__(self, stream, copy):
        self._stream = stream
        self._copy = copy

    def write(self, text):
        self._copy.write(text)
        return self._stream.write(text)

    def flush(self):
        self._copy.flush()
        self._stream.flush()

    def __getattr__(self, name):
        return getattr(self._stream, name)


def _tee_stdout(audit_dir: str, pid: int) -> None:
    rank = os.environ.get("RANK", "")
    copy = open(  # noqa: SIM115
        os.path.join(audit_dir, f"stdout.{pid}.{rank}.txt"), "a", buffering=1
    )
    sys.stdout = _Tee(sys.stdout, copy)


if _AUDIT_DIR:
    _install(_AUDIT_DIR)
