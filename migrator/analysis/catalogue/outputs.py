"""Outputs: the calls that show a value to the user (print, loggers, trackers), read by the
binding of what they are called on, not by the method's name alone.

`logger.info(x)`, `writer.add_scalar(tag, x)`, `bar.set_postfix(loss=x)` show `x`: their
receivers are objects (a logger, a writer, a progress bar). `torch.log(x)`, `np.log(x)`,
`math.log(x)` compute: their receivers are modules bound by `import`, and a module's function
is an output only where the catalogue says so (`logging.info`, `wandb.log`). A method called on
a per-process tensor (`loss.log()`) computes too; that part is the value flow's
(soundness/per_process.py).
"""

from __future__ import annotations

import ast

from migrator.analysis.catalogue.effects import TRACKER_CALLS
from migrator.analysis.syntax.imports import ImportTable, dotted_name

OUTPUT_FUNCTIONS = {"print"}
OUTPUT_METHODS = {
    "print", "log", "info", "debug", "warning", "error", "add_scalar", "add_scalars",
    "log_metric", "log_metrics", "set_postfix", "set_description", "write",
}  # fmt: skip
# modules whose functions of OUTPUT_METHODS show what they are given (besides TRACKER_CALLS)
OUTPUT_MODULES = ("logging.",)


def module_function(call: ast.Call, imports: ImportTable) -> bool:
    """`torch.log(x)`, `np.log(x)`: a function of a module the file imports (`import torch`,
    `import numpy as np`), called through the module's name; not a method of an object (a
    name bound by `from m import logger` is an object: it may be one)."""
    func = call.func
    if not isinstance(func, ast.Attribute):
        return False
    dotted = dotted_name(func.value)
    if dotted is None:
        return False
    head = dotted.split(".")[0]
    if head not in imports.aliases:
        return False
    full = imports.aliases[head]
    module, _, name = full.rpartition(".")
    return (module, name) not in imports.from_imports


def shows(call: ast.Call, imports: ImportTable) -> bool:
    """Does `call` show its arguments (its receiver aside: soundness/per_process.py)?"""
    func = call.func
    if isinstance(func, ast.Name):
        return func.id in OUTPUT_FUNCTIONS
    if not isinstance(func, ast.Attribute) or func.attr not in OUTPUT_METHODS:
        return False
    if func.attr == "write":
        return False  # a file's write: a side effect (effects.py), not a shown value
    if module_function(call, imports):
        qualified = imports.qualify(func) or ""
        return qualified in TRACKER_CALLS or qualified.startswith(OUTPUT_MODULES)
    return True
