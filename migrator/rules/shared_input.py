"""MIG030 on `input(...)`: run on every process, each process would stop at a prompt of its
own, and the processes a launcher starts after the first share one terminal (or none), so
they read different answers, or wait forever; whatever the answer decides (`epochs =
int(input(...))`, `if input(...) == "q": break`) would then differ between processes.

The answer is read once, on the main process, and shared with the others:
`broadcast_object_list([input(prompt) if accelerator.is_main_process else None])[0]` (the
utility HF Accelerate and our runtime keep in their `utils` module). A program that shadows
`input` keeps its own function; a prompt only the main process reaches is left as it is.
"""

from __future__ import annotations

import ast

from migrator.rules.base import RuleContext


def share_input(context: RuleContext, scopes) -> None:
    module_scope = context.facts.index.module_scope
    if "input" in module_scope.bindings:
        return  # the program's own `input`
    for scope in scopes:
        if "input" in scope.bindings:
            continue
        for site in scope.calls:
            func = site.node.func
            if not (isinstance(func, ast.Name) and func.id == "input"):
                continue
            if not context.processes.runs_on_every_process(site.statement):
                continue
            _share(context, site)


def _share(context: RuleContext, site) -> None:
    module = f"{context.import_source}.utils"
    if (module, None) not in context.extra_imports:
        context.extra_imports.append((module, None))
    call = site.node

    def shared(flag: str):
        return lambda text, _r: f"{module}.broadcast_object_list([{text} if {flag} else None])[0]"

    context.edits.replace(call, shared(context.main_process_flag()))

    def fallback() -> None:  # no accelerator where the prompt runs: the process-wide state's
        context.edits.cancel(call)
        context.edits.replace(call, shared(context.main_process_flag(through_state=True)))

    context.need_accelerator_at(site.statement, fallback=fallback)
