"""Side effects: the APIs that change the world outside the process, declared in one place.

On N processes each of these runs N times unless it runs on the main process only: the same
file written by every process at once (torn or doubled checkpoints, CSV logs, figures), the
same run logged N times in a tracker, N downloads racing into one folder. The catalogue is
read by MIG030, which guards them, and by the soundness check on every migrated program
(migrator/soundness/), which refuses a program where one still runs on every process.

`effect_of(call, imports)` classifies one call: an `Effect` naming what it does, or None. A
call that is made safe on every process (`os.makedirs(d, exist_ok=True)`, a read-only
`open`) is no effect; a write to a path that names the process's rank (`f"log_{rank}.txt"`)
is each process's own file, not a shared one.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass

from migrator.analysis.syntax.imports import ImportTable, dotted_name
from migrator.analysis.syntax.views import keyword, positional

# qualified name -> what it writes
WRITE_CALLS = {
    "torch.save": "a file",
    "torch.jit.save": "a file",
    "torch.onnx.export": "a file",
    "numpy.save": "a file",
    "numpy.savez": "a file",
    "numpy.savez_compressed": "a file",
    "numpy.savetxt": "a file",
    "matplotlib.pyplot.savefig": "a figure",
    "torchvision.utils.save_image": "an image",
    "imageio.imwrite": "an image",
    "imageio.imsave": "an image",
    "imageio.mimsave": "an animation",
    "cv2.imwrite": "an image",
    "scipy.io.savemat": "a file",
    "soundfile.write": "an audio file",
    "torchaudio.save": "an audio file",
    "shutil.copy": "a file",
    "shutil.copy2": "a file",
    "shutil.copyfile": "a file",
    "shutil.copytree": "a folder",
    "shutil.move": "a file",
    "shutil.rmtree": "a folder (removed)",
    "os.remove": "a file (removed)",
    "os.unlink": "a file (removed)",
    "os.rename": "a file (renamed)",
    "os.replace": "a file (renamed)",
    "os.rmdir": "a folder (removed)",
    "os.mkdir": "a folder",
    "os.makedirs": "a folder",
    "os.system": "a shell command",
    "logging.FileHandler": "a log file",
    "logging.handlers.RotatingFileHandler": "a log file",
    "logging.handlers.TimedRotatingFileHandler": "a log file",
}
# method name -> what it writes, on any receiver (names only files and trackers use)
WRITE_METHODS = {
    "to_csv": "a CSV file",
    "to_json": "a JSON file",
    "to_parquet": "a file",
    "to_pickle": "a file",
    "savefig": "a figure",
    "write_text": "a file",
    "write_bytes": "a file",
    "save_pretrained": "model files",
    "push_to_hub": "a hub upload",
    "save_model": "model files",
    "export_chrome_trace": "a trace file",
    "save": "a file",  # `model.save(dir, step, optimizer)`, `image.save(path)`
    "save_checkpoint": "a checkpoint",
}
# receivers whose `save` writes on the main process only already (`accelerator.save(...)`)
MAIN_ONLY_SAVERS = ("accelerator",)
TRACKER_CALLS = {
    "wandb.init", "wandb.log", "wandb.finish", "wandb.watch", "wandb.save", "wandb.config.update",
    "mlflow.start_run", "mlflow.log_metric", "mlflow.log_metrics", "mlflow.log_param",
    "mlflow.log_params", "mlflow.log_artifact", "mlflow.log_artifacts", "mlflow.end_run",
    "mlflow.pytorch.log_model", "mlflow.set_experiment",
}  # fmt: skip
# constructors of tracker objects (their methods log: `writer.add_scalar`)
TRACKER_OBJECTS = ("SummaryWriter", "wandb.init", "comet_ml.Experiment", "neptune.init_run")
DOWNLOAD_CALLS = {
    "torch.hub.load", "torch.hub.load_state_dict_from_url", "torch.hub.download_url_to_file",
    "urllib.request.urlretrieve", "wget.download", "gdown.download",
    "huggingface_hub.hf_hub_download", "huggingface_hub.snapshot_download",
    "torchvision.datasets.utils.download_url", "torchvision.datasets.utils.download_and_extract_archive",
    "nltk.download", "datasets.load_dataset",
}  # fmt: skip
# data sets that download (and process into their folder) when they are made, with no
# `download=` to say so: PyTorch Geometric's (`Planetoid(root, "Cora")`), torchtext's
DOWNLOADING_DATASETS = ("torch_geometric.datasets.", "torchtext.datasets.")
# packages whose `...Dataset` classes download and extract on construction, with no flag
GRAPH_DATASETS = ("dgl.data.", "ogb.nodeproppred.", "ogb.graphproppred.", "ogb.linkproppred.")
# where the path goes, when it is not the first argument (position, keyword)
PATH_ARGUMENTS = {
    "torch.save": (1, "f"),
    "torch.jit.save": (1, "f"),
    "torch.onnx.export": (2, "f"),
    "torchvision.utils.save_image": (1, "fp"),
    "shutil.copy": (1, "dst"),
    "shutil.copy2": (1, "dst"),
    "shutil.copyfile": (1, "dst"),
    "shutil.copytree": (1, "dst"),
    "shutil.move": (1, "dst"),
}
MEMORY_FILES = {"io.BytesIO", "io.StringIO", "BytesIO", "StringIO"}
OPEN_CALLS = {"open", "io.open", "codecs.open", "gzip.open", "h5py.File"}
WRITE_MODES = set("wax+")
MAKE_DIRS = {"os.makedirs"}  # safe with `exist_ok=True`
RANK_WORDS = ("rank", "process_index", "local_process_index", "gpu", "device_id")
# keep the main process's order, not its exclusivity: downloads inside are made safe
MAIN_FIRST = "main_process_first"


@dataclass(frozen=True)
class Effect:
    kind: str  # write | tracker | download | log
    what: str  # "a file", "a figure", ...
    call: ast.Call


def disabled_off_main(call: ast.Call) -> bool:
    """`wandb.init(..., mode=None if accelerator.is_main_process else "disabled")`: a run on
    the main process only, and a disabled one (no files, no upload) on the others."""
    mode = keyword(call, "mode")
    if mode is None or not isinstance(mode.value, ast.IfExp):
        return False
    text = ast.unparse(mode.value)
    return "is_main_process" in text and "'disabled'" in text


def effect_of(call: ast.Call, imports: ImportTable, values=None) -> Effect | None:
    """What `call` does to the world, if anything (module docstring). `values(name)`: the
    values a name may hold where the call reads it (a name bound to `io.BytesIO()` is no
    file), when the caller knows them."""
    qualified = imports.qualify(call.func) or ""
    helper = imports.helper_effects.get(qualified) if imports.helper_effects else None
    if helper is None and imports.helper_effects and values is not None:
        helper = _method_effect(call, imports, values)  # `logger.log(...)`, a class's method
    if helper is not None:  # a project helper whose own body writes (helper_effects.py)
        return Effect(helper.kind, f"{helper.what}, in `{qualified}`", call)
    if qualified in OPEN_CALLS:
        return Effect("write", "a file", call) if _writes(call) and not _own(call) else None
    if qualified in MAKE_DIRS:
        made_safe = _is_true(keyword(call, "exist_ok"))
        return None if made_safe or _own(call) else Effect("write", "a folder", call)
    if qualified in WRITE_CALLS:
        path = path_argument(call, qualified)
        if _own(call, path) or _in_memory(path, imports, values):
            return None
        return Effect("write", WRITE_CALLS[qualified], call)
    if qualified == "wandb.init" and disabled_off_main(call):
        return None  # a disabled run on the other processes: `wandb.config` still reads
    if qualified in TRACKER_CALLS or qualified.endswith(TRACKER_OBJECTS):
        return Effect("tracker", "a tracker's run", call)
    if qualified in DOWNLOAD_CALLS or _is_true(keyword(call, "download")):
        return Effect("download", "a download", call)
    if qualified.startswith(DOWNLOADING_DATASETS) and keyword(call, "download") is None:
        return Effect("download", "a download", call)
    if qualified.startswith(GRAPH_DATASETS) and qualified.endswith("Dataset"):
        return Effect("download", "a download", call)  # DGL's and OGB's fetch when made
    if qualified == "logging.basicConfig" and (
        keyword(call, "filename") is not None
        or _file_handlers(keyword(call, "handlers"), imports, values)
    ):  # `basicConfig(handlers=[logging.FileHandler(path), logging.StreamHandler()])`
        return Effect("log", "a log file", call)
    if qualified == "loguru.logger.add" and call.args and _file_sink(call.args[0]):
        return Effect("log", "a log file", call)  # loguru's `logger.add("logs/train.log")`
    method = call.func.attr if isinstance(call.func, ast.Attribute) else None
    if method == "addHandler" and call.args and _file_handlers(call.args[0], imports, values):
        return Effect("log", "a log file", call)  # `FileHandler(...)`, or a name bound to one
    if method == "open" and path_opens_for_writing(call):  # `log_path.open("w")` of a Path
        return None if _own(call, call.func.value) else Effect("write", "a file", call)
    if method in WRITE_METHODS and not _own(call) and not _main_only_saver(call.func):
        return Effect("write", WRITE_METHODS[method], call)
    if method == "mkdir" and not _is_true(keyword(call, "exist_ok")):
        return Effect("write", "a folder", call)
    return None


def _file_handlers(expr: ast.expr | None, imports: ImportTable, values=None, hops: int = 2) -> bool:
    """Is `expr` a logging handler writing a file (`logging.FileHandler(path)`, its rotating
    kinds), or a list or tuple holding one, or a name bound to either (`handlers` in `values`
    where the caller knows them)?"""
    if isinstance(expr, ast.Call):
        return (imports.qualify(expr.func) or "").endswith("FileHandler")
    if isinstance(expr, (ast.List, ast.Tuple)):
        return any(_file_handlers(e, imports, values, hops) for e in expr.elts)
    if isinstance(expr, ast.Name) and values is not None and hops > 0:
        return any(_file_handlers(v, imports, values, hops - 1) for v in values(expr.id))
    return False


def _file_sink(sink: ast.expr) -> bool:
    """A loguru sink that is a file: a path (a string, an f-string, `Path(...)`, a name
    holding one), not a stream (`sys.stderr`) or a function (`lambda m: tqdm.write(m)`)."""
    if isinstance(sink, ast.Lambda):
        return False
    if isinstance(sink, ast.Attribute):
        return not (isinstance(sink.value, ast.Name) and sink.value.id == "sys")
    return True


def _method_effect(call: ast.Call, imports: ImportTable, values):
    """The effect of `x.method(...)` where `x` is bound to an instance of a project class
    whose method writes (`logger = ResultsLogger(); logger.log(...)`)."""
    func = call.func
    if not isinstance(func, ast.Attribute) or not isinstance(func.value, ast.Name):
        return None
    for value in values(func.value.id):
        made = imports.qualify(value.func) if isinstance(value, ast.Call) else None
        found = imports.helper_effects.get(f"{made}.{func.attr}") if made else None
        if found is not None:
            return found
    return None


def values_in(scope):
    """`values(name)` for `effect_of`: what `name` is bound to in `scope` (an index Scope)."""

    def values(name: str) -> list:
        return [b.value for b in scope.assigns(name) if b.value is not None and not b.unpacked]

    return values


def is_tracker_object(call: ast.Call, imports: ImportTable) -> bool:
    return (imports.qualify(call.func) or "").endswith(TRACKER_OBJECTS)


def writing_mode(call: ast.Call) -> bool:
    """`open(path, "w")`, `open(path, mode="ab")`: a mode that writes."""
    text = _mode(call, 1)
    return text is not None and bool(WRITE_MODES & set(text))


def _mode(call: ast.Call, position: int) -> str | None:
    """The mode string a call opens with: its `mode=`, else its argument at `position`."""
    mode = keyword(call, "mode")
    if mode is None:
        found = positional(call)
        mode = found[position] if len(found) > position else None
    value = mode.value if mode is not None else None
    return value.value if isinstance(value, ast.Constant) and isinstance(value.value, str) else None


_writes = writing_mode


def path_argument(call: ast.Call, qualified: str) -> ast.expr | None:
    """The path (or file object) a writing call writes to."""
    position, name = PATH_ARGUMENTS.get(qualified, (0, None))
    if name is not None and keyword(call, name) is not None:
        return keyword(call, name).value
    found = positional(call)
    return found[position].value if len(found) > position else None


def _in_memory(path: ast.expr | None, imports: ImportTable, values) -> bool:
    """`torch.save(state, buffer)` with `buffer = io.BytesIO()`: no file."""
    candidates = [path]
    if isinstance(path, ast.Name) and values is not None:
        candidates = values(path.id) or [path]
    return all(
        isinstance(c, ast.Call) and (imports.qualify(c.func) or "") in MEMORY_FILES
        for c in candidates
    )


MODE = re.compile(r"^[rwxabt+]{1,4}$")


def path_opens_for_writing(call: ast.Call) -> bool:
    """`path.open("w")`, `path.open(mode="a", ...)`: a `pathlib.Path` opened to write (its
    mode comes first; `Image.open("x.png")` names a file, which is no mode)."""
    text = _mode(call, 0)
    return text is not None and bool(MODE.match(text)) and bool(WRITE_MODES & set(text))


def _own(call: ast.Call, path: ast.expr | None = None) -> bool:
    """The path names the process: each process writes a file of its own (or `os.devnull`,
    where nothing is written)."""
    if path is None:
        found = positional(call)
        path = found[0].value if found else None
    if path is None:
        return False
    if dotted_name(path) == "os.devnull":
        return True  # nothing is written: each process may open it
    for node in ast.walk(path):
        name = dotted_name(node) if isinstance(node, (ast.Name, ast.Attribute)) else None
        if name is not None and any(word in name.lower() for word in RANK_WORDS):
            return True
    return False


def _main_only_saver(func: ast.Attribute) -> bool:
    """`accelerator.save(...)`, `self.accelerator.save(...)`: it writes on the main process."""
    receiver = dotted_name(func.value) or ""
    return receiver.rsplit(".", 1)[-1] in MAIN_ONLY_SAVERS


def _is_true(arg) -> bool:
    value = arg.value if arg is not None else None
    return isinstance(value, ast.Constant) and value.value is True
