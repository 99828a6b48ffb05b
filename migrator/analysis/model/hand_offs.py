"""What code that is handed a model does with it: trains it, or saves it, loads into it, reads
its own attributes, evaluates it.

A prepared model is wrapped in DistributedDataParallel: code that trains it needs the wrapper
(its forward averages the gradients), code that does anything else needs the model itself
(`save_pretrained`, `state_dict()` keys without `module.`, `load_state_dict` of a plain
checkpoint, `model.latent_dim`). Read from the helper's body where the program has it (a
module of the program that is not joined: helper_library.py), else from its name
(`save_checkpoint`, `load_checkpoint`, `visualize_latent_space`, `evaluate`): the words
`train`, `fit`, `step` keep the wrapper, and a call that also hands over an optimizer trains.
"""

from __future__ import annotations

import ast
import re

from migrator.analysis.catalogue import effects, patterns
from migrator.analysis.syntax.imports import ImportTable, dotted_name

TRAINS = "trains"
SAVES = "saves"
LOADS = "loads"
READS = "reads"
EVALUATES = "evaluates"
UNWRAPPED = (SAVES, LOADS, READS, EVALUATES)  # roles that need the model itself

WORDS = {
    TRAINS: {"train", "training", "fit", "step", "optimize", "optimise", "backward", "learn",
             "finetune", "loss", "losses", "objective", "criterion", "forward"},
    SAVES: {"save", "checkpoint", "ckpt", "export", "dump", "store", "persist", "serialize",
            "upload", "push", "write"},
    LOADS: {"load", "restore", "resume", "reload"},
    EVALUATES: {"eval", "evaluate", "evaluation", "validate", "validation", "val", "valid",
                "test", "testing", "infer", "inference", "predict", "prediction", "score",
                "metric", "metrics", "accuracy", "sample", "sampling", "generate",
                "generation", "fid", "reconstruct"},
    READS: {"visualize", "visualise", "visualization", "visualisation", "plot", "show", "draw",
            "summary", "summarize", "summarise", "describe", "print", "count", "inspect",
            "profile", "display", "latent", "embedding", "embeddings", "features", "watch",
            "histogram", "log"},
}  # fmt: skip
ORDER = (TRAINS, SAVES, LOADS, READS, EVALUATES)  # the first that applies
# library functions handed a model that read or save it (not the program's own helpers)
LIBRARY_ROLES = {
    "torch.onnx.export": SAVES,
    "torch.jit.trace": READS,
    "torch.jit.script": READS,
    "torchinfo.summary": READS,
    "torchsummary.summary": READS,
    "thop.profile": READS,
    # a quantized copy of the module: of the plain one (eager quantization is CPU-only)
    "torch.quantization.quantize_dynamic": READS,
    "torch.ao.quantization.quantize_dynamic": READS,
}
# top-level packages whose functions are no helper of the program: a call handing them the
# model is left as it is unless LIBRARY_ROLES names it
LIBRARIES = frozenset({
    "torch", "torchvision", "torchaudio", "torchtext", "transformers", "datasets", "numpy",
    "scipy", "sklearn", "pandas", "matplotlib", "PIL", "cv2", "wandb", "mlflow", "tensorboard",
    "tensorboardX", "tqdm", "timm", "accelerate", "peft", "diffusers", "huggingface_hub",
    "lightning", "pytorch_lightning", "thop", "torchinfo", "torchsummary", "onnx", "copy",
    "os", "sys", "json", "pickle", "logging", "math", "random", "time", "datetime", "shutil",
    "pathlib", "itertools", "functools", "collections", "typing", "warnings", "glob", "re",
    "argparse", "dataclasses", "inspect", "gc", "contextlib", "einops", "safetensors",
    "deepspeed", "apex", "optuna", "ray", "hydra", "omegaconf", "yaml", "seaborn", "imageio",
})  # fmt: skip
STEP_METHODS = frozenset({"backward", "step", "zero_grad"})
# the first word of a helper that writes files (`save_checkpoint`, `export_onnx`, `dump_preds`)
WRITING_VERBS = frozenset({"save", "export", "dump", "write", "store", "persist", "serialize",
                           "upload", "push", "checkpoint"})  # fmt: skip


def words_of(name: str) -> list[str]:
    """`save_checkpoint` -> [save, checkpoint]; `visualizeLatentSpace` -> [visualize, latent,
    space]."""
    spaced = re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", name)
    return [w for w in re.split(r"[_\W\d]+", spaced.lower()) if w]


def name_role(name: str) -> str | None:
    """The role a helper's name gives it (module docstring), or None when it says nothing: a
    word that trains, else its first word (`load_checkpoint` loads), else any word."""
    words = words_of(name.rsplit(".", 1)[-1])
    if set(words) & WORDS[TRAINS]:
        return TRAINS
    first = next((role for role in ORDER if words and words[0] in WORDS[role]), None)
    return first or next((role for role in ORDER if set(words) & WORDS[role]), None)


def is_library(qualified: str | None) -> bool:
    return bool(qualified) and qualified.split(".")[0] in LIBRARIES


def foreign_callee(call: ast.Call, imports: ImportTable) -> str | None:
    """The qualified name of a function imported from another module (absolute or relative:
    `.utils.save`), or None."""
    dotted = dotted_name(call.func)
    if dotted is None:
        return None
    head, _, rest = dotted.partition(".")
    if head in imports.relative:
        return imports.relative[head] + (f".{rest}" if rest else "")
    if not imports.imported(head):
        return None
    return imports.qualify(call.func) or dotted


NAMED, BODY = "named", "body"


def helper_writes(call: ast.Call, imports: ImportTable, library) -> str | None:
    """Does the call run a helper of the program that writes files? NAMED: its name says so
    (`save_checkpoint(...)`, a figure helper handed a file: `plot_losses(h, "loss.png")`);
    BODY: only its body in the program's library does (a data preparation step, which other
    code may read at once). None: no, or it cannot be told."""
    callee = foreign_callee(call, imports)
    if callee is None or is_library(callee):
        return None
    words = words_of(callee.rsplit(".", 1)[-1])
    if (words and words[0] in WRITING_VERBS) or (
        name_role(callee) == READS and _names_a_file(call)
    ):
        return NAMED
    found = library.called(call, imports, callee)
    if found is not None:
        module, function = found
        return BODY if BodyReader(module.functions, module.imports).writes(function) else None
    return None


def _names_a_file(call: ast.Call) -> bool:
    """Is the call handed a file to write: a literal path with an extension (`"loss.png"`,
    `f"latents_{epoch}.txt"`), or a keyword named for one (`save_fig_path=...`)?"""
    for keyword in call.keywords:
        if keyword.arg and set(words_of(keyword.arg)) & {"save", "out", "output", "fig"}:
            return True
    for argument in [*call.args, *(k.value for k in call.keywords)]:
        parts = argument.values if isinstance(argument, ast.JoinedStr) else [argument]
        last = parts[-1] if parts else None
        text = patterns.string_value(last)
        if text is not None and re.search(r"\.[A-Za-z]{2,5}$", text):
            return True
    return False


class BodyReader:
    """Reads helpers' bodies in one module (`functions`: its top-level functions by name,
    `imports`: its import table), following the parameter into the module's own helpers."""

    def __init__(self, functions: dict, imports: ImportTable) -> None:
        self.functions = functions
        self.imports = imports

    def role(self, function: ast.AST, param: str, depth: int = 0) -> str | None:
        """What `function` does with its parameter `param` (the first role of ORDER)."""
        found: set[str] = set()
        if self.steps(function, depth):
            return TRAINS
        for node in ast.walk(function):
            found |= self._use_roles(node, param, depth)
        return next((role for role in ORDER if role in found), None)

    def steps(self, function: ast.AST, depth: int = 0) -> bool:
        """Does the function run a backward or an optimizer step (here, or in a helper of its
        module that it calls)?"""
        for node in ast.walk(function):
            if not isinstance(node, ast.Call):
                continue
            if isinstance(node.func, ast.Attribute) and node.func.attr in STEP_METHODS:
                return True
            inner = self.functions.get(node.func.id) if isinstance(node.func, ast.Name) else None
            if inner not in (None, function) and depth < 3 and self.steps(inner, depth + 1):
                return True
        return False

    def writes(self, function: ast.AST, depth: int = 0) -> bool:
        """Does the function write a file, a tracker or a download (the effects catalogue),
        here or in a helper of its module that it calls?"""
        for node in ast.walk(function):
            if not isinstance(node, ast.Call):
                continue
            if effects.effect_of(node, self.imports) is not None:
                return True
            inner = self.functions.get(node.func.id) if isinstance(node.func, ast.Name) else None
            if inner not in (None, function) and depth < 3 and self.writes(inner, depth + 1):
                return True
        return False

    def _use_roles(self, node: ast.AST, param: str, depth: int) -> set[str]:
        if isinstance(node, ast.Attribute) and _is(node.value, param):
            if node.attr in ("state_dict", "save_pretrained"):
                return {SAVES}
            if node.attr == "load_state_dict":
                return {LOADS}
            if node.attr == "forward":
                return {EVALUATES}
            return set() if node.attr in patterns.MODULE_API else {READS}
        if isinstance(node, ast.Subscript) and _is(node.value, param):
            return {READS}  # `model[-1]`: DDP has no `__getitem__`
        if not isinstance(node, ast.Call):
            return set()
        if _is(node.func, param):
            return {EVALUATES}
        handed = [a for a in [*node.args, *(k.value for k in node.keywords)] if _is(a, param)]
        if not handed:
            return set()
        qualified = self.imports.qualify(node.func) or ""
        if qualified in ("torch.save", "torch.jit.save") or qualified in LIBRARY_ROLES:
            return {LIBRARY_ROLES.get(qualified, SAVES)}
        if qualified in ("getattr", "setattr", "hasattr", "type", "isinstance"):
            return {READS}
        inner = self.functions.get(node.func.id) if isinstance(node.func, ast.Name) else None
        if inner is not None and depth < 3:
            position = next(i for i, a in enumerate([*node.args, *node.keywords])
                            if a in handed or getattr(a, "value", None) in handed)  # fmt: skip
            inner_param = _param_at(inner, node, position)
            role = self.role(inner, inner_param, depth + 1) if inner_param else None
            return {role} if role else set()
        role = name_role(qualified) if not is_library(qualified) else None
        return {role} if role else set()


def _param_at(function: ast.AST, call: ast.Call, position: int) -> str | None:
    """The parameter of `function` that the argument at `position` of `call` fills."""
    if position >= len(call.args):
        keyword = call.keywords[position - len(call.args)]
        return keyword.arg
    params = [a.arg for a in [*function.args.posonlyargs, *function.args.args]]
    return params[position] if position < len(params) else None


def _is(node: ast.AST, name: str) -> bool:
    return isinstance(node, ast.Name) and node.id == name
