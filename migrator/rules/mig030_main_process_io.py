"""MIG030 main-process I/O: on N processes every rank would print every line and write every
checkpoint. In training code (the training scopes, and the functions an epoch loop calls:
`checkpoint(epoch)`):

- `print(...)` -> `accelerator.print(...)` (once per node);
- `torch.save(<model>.state_dict(), path)` (directly, or through a dict built in the same
  function) -> `accelerator.save(accelerator.unwrap_model(<model>).state_dict(), path)`: the
  main process writes, and the keys carry no `module.` prefix;
- `tqdm(...)` progress bars get `disable=not accelerator.is_local_main_process` (a
  constant `disable=False` too: it shows the bar on every process).
`torch.save` of anything that is not a prepared model's state is left as it is. Other file
writes and trackers (`with open(path, "w")`, `np.save`, `save_image`, `SummaryWriter`,
`wandb`) go under `if accelerator.is_main_process:` (main_process_writes.py).
"""

from __future__ import annotations

import ast

from migrator.analysis.catalogue import effects, patterns
from migrator.analysis.model.chains import chain_text
from migrator.analysis.syntax.index import CallSite, Line, Scope
from migrator.analysis.syntax.views import name_value
from migrator.arglists import call_items
from migrator.rules.accelerator_guard import runs_at_import
from migrator.rules.base import Rule, RuleContext
from migrator.rules.download_blocks import download_main_first
from migrator.rules.log_levels import quiet_other_processes
from migrator.rules.main_process_writes import (
    every_process_scopes,
    guard_statement,
    guard_writes,
    make_folders_safe,
)
from migrator.rules.shared_files import wait_for_shared_files
from migrator.rules.shared_input import share_input


class MainProcessIO(Rule):
    code = "MIG030"
    name = "main-process-io"
    summary = (
        "print -> accelerator.print; torch.save of models -> accelerator.save; quiet tqdm; "
        "file writes and trackers on the main process"
    )
    triggers = ("backward",)  # acts only in files with a training loop

    def apply(self, context: RuleContext) -> None:
        self.waited: set[int] = set()  # loads a wait after their save already covers
        imports = context.facts.index.imports
        every = every_process_scopes(context)
        scopes = [
            *context.facts.training_scopes,
            *(s for s in every if s not in context.facts.training_scopes),
        ]
        for scope in scopes:
            if "print" in scope.bindings or "print" in context.facts.index.module_scope.bindings:
                printing = False  # a local `print` is somebody else's function
            else:
                printing = True
            for site in scope.calls:
                qualified = imports.qualify(site.node.func) or ""
                if printing and qualified == "print" and isinstance(site.node.func, ast.Name):
                    self._print(context, site)
                elif qualified == "torch.save":
                    self._save(context, scope, site)
                elif qualified in patterns.PROGRESS_BARS:
                    self._progress_bar(context, site)
                elif qualified in patterns.BAR_PRINTS:
                    self._bar_print(context, site)
                elif qualified in patterns.FIGURE_SHOWS or (
                    patterns.prints_itself(site.node, imports)
                    and not _runs_prepared_model(context, scope, site)
                ):  # `plt.show()`, `df.info()`: on the main process
                    statement = _whole_statement(site)
                    if statement and context.processes.runs_on_every_process(statement):
                        guard_statement(context, statement, through_state=False)
        guard_writes(context, scopes)
        make_folders_safe(context, scopes)
        download_main_first(context, scopes)
        share_input(context, scopes)
        quiet_other_processes(context, scopes)
        wait_for_shared_files(context, self.waited)

    def _print(self, context: RuleContext, site: CallSite) -> None:
        imports = context.facts.index.imports
        statement = _whole_statement(site)
        if statement is not None and any(
            isinstance(node, ast.Call) and patterns.prints_itself(node, imports)
            for argument in site.node.args
            for node in ast.walk(argument)
        ):  # `print(df.info())`: what it prints, it prints itself
            if context.processes.runs_on_every_process(statement):
                guard_statement(context, statement, through_state=False)
            return
        replacement = context.accelerator_expr("print")
        context.edits.replace_with(site.node.func, replacement)

        def fallback() -> None:  # no accelerator here: the process-wide state's print
            context.edits.cancel(site.node.func)
            # not where the state would be made first for an Accelerator(cpu=...) (it would
            # pick the GPU that one refuses), nor in code run at import (DataLoader workers
            # started by spawn import the script again: a state made there would hang)
            cpu = any(kwarg.name == "cpu" for kwarg in context.kwargs)
            if not cpu and not runs_at_import(site.statement):
                context.edits.replace_with(site.node.func, context.state_expr("print"))

        context.need_accelerator_at(site.statement, soft=site.node.func, fallback=fallback)

    def _bar_print(self, context: RuleContext, site: CallSite) -> None:
        """`tqdm.write(...)` prints beside the bars on every process: on the main process
        only, as a statement of its own under the guard (tqdm's print kept), or else (a
        suite, a line of several statements) as `accelerator.print(...)`."""
        if not context.processes.runs_on_every_process(site.statement):
            return
        statement = _whole_statement(site)
        if statement is not None:
            guard_statement(context, statement, through_state=False)
        elif all(keyword.arg in ("file", "end") for keyword in site.node.keywords):
            self._print(context, site)

    def _save(self, context: RuleContext, scope: Scope, site: CallSite) -> None:
        args = patterns.positional(site.node)
        if not args:
            return
        saved = args[0].value
        state_calls = _model_states(context, scope, saved)
        if name_value(saved) is not None and not state_calls:
            for binding in scope.assigns(name_value(saved)):
                if binding.value is not None and not binding.unpacked:
                    state_calls += _model_states(context, scope, binding.value)
        saved_name = patterns.name_of(saved) or chain_text(saved)  # `self.cfg.model` too
        whole_model = saved_name is not None and context.prepared_role(scope, saved_name) == "model"
        effect = effects.effect_of(site.node, context.facts.index.imports, effects.values_in(scope))
        shared = effect is not None and context.processes.runs_on_every_process(site.statement)
        if not state_calls and not whole_model:
            if not shared:
                return  # an in-memory buffer, each process's own file, or main-only already
            save = context.accelerator_expr("save")
            context.edits.replace_with(site.node.func, save)
            statement = _whole_statement(site)

            def fallback() -> None:  # no accelerator here: the plain save, on the main process
                context.edits.cancel(site.node.func)
                guard_statement(context, statement, through_state=True)

            fallback = fallback if statement is not None else None
            context.need_accelerator_at(site.statement, fallback=fallback)
            return
        for call in state_calls:
            context.unwrap(call.func.value)
        if whole_model:
            context.unwrap(saved)
        if effect is None:  # into a buffer, or each process's own file: every process saves
            for call in [*state_calls, *([saved] if whole_model else [])]:
                statement = _statement_of(context, call)
                if statement is not None:
                    context.need_accelerator_at(statement)
            return
        save = context.accelerator_expr("save")
        context.edits.replace_with(site.node.func, save)
        context.need_accelerator_at(site.statement)
        for call in state_calls:
            statement = _statement_of(context, call)
            if statement is not None:
                context.need_accelerator_at(statement)
        self.waited |= _wait_before_loads(context, site)

    def _progress_bar(self, context: RuleContext, site: CallSite) -> None:
        flag = f"not {context.accelerator_expr('is_local_main_process')}"
        given = patterns.keyword(site.node, "disable")
        if given is not None:
            if _shown_everywhere(given.value):  # `disable=False`: a bar on every process
                context.edits.replace(given.value, lambda _text, _renderer: flag)
                context.need_accelerator_at(site.statement)
            return
        call = site.node

        def rewrite(_text: str, renderer) -> str:
            return call_items(renderer, call).appended(f"disable={flag}").render()

        context.edits.rewrite(call, rewrite)
        context.need_accelerator_at(site.statement)


def _shown_everywhere(value: ast.expr) -> bool:
    """`False` (or `0`) written as the `disable=` of a bar: never disabled. `None` (disabled
    where the output is no terminal) and expressions are the script's own choice."""
    return isinstance(value, ast.Constant) and value.value is not None and value.value in (0, False)


def _wait_before_loads(context: RuleContext, site: CallSite) -> set[int]:
    """Only the main process writes now: when this file loads the same path back later
    (`torch.load(path)` on every process, in an evaluation after training), the others wait
    for the write to finish (`accelerator.wait_for_everyone()` after the save), or they read
    a missing or half-written file. Only for a save at the top level of the module or of a
    function that trains (every process runs it, or training would hang already): in a
    branch, or in a helper some process may skip, a wait would hang the others. The path is
    a literal or a name (`PATH`), so that the same text names the same file."""
    args = patterns.positional(site.node)
    path = args[1].value if len(args) > 1 else patterns.keyword(site.node, "f")
    block = site.statement.block
    if path is None or block.parent is not None or block.kind not in ("body", "module"):
        return set()
    if block.scope not in context.facts.training_scopes and block.scope.kind != "module":
        return set()
    if not (isinstance(path, ast.Name) or patterns.string_value(path) is not None):
        return set()
    text = context.source.text_of(path)
    imports = context.facts.index.imports
    later = [
        call
        for call in context.facts.index.calls()
        if imports.qualify(call.node.func) == "torch.load"
        and call.node.args
        and context.source.text_of(call.node.args[0]) == text
        and call.node.lineno > site.node.end_lineno
    ]
    index = site.statement.index + 1
    waited = {id(c.node) for c in later}
    if not later or _waits_at(context, block, index) or all(_waited(context, c) for c in later):
        return waited
    code = f"{context.accelerator}.wait_for_everyone()\n"
    context.edits.insert(block, index, context.statement(code), priority=30)
    context.need_accelerator_before(block, index, "accelerator.wait_for_everyone()")
    return waited


def _waited(context: RuleContext, load: CallSite) -> bool:
    """Does MIG006 already put a wait before this load (module code loading, after the call
    of the function that trained and saved, what it saved)?"""
    for statement in load.statement.chain():
        for block, index in context.plan.waits:
            if block is statement.block and index <= statement.index:
                return True
    return False


def _waits_at(context: RuleContext, block, index: int) -> bool:
    """Is there a barrier at `index` of `block` already: the script's own
    (`dist.barrier()`), or the one MIG006 puts before a model re-created to load a save?"""
    plan = context.plan
    if any(b is block and i == index for _name, b, i in plan.reloaded):
        return True
    if index >= len(block.statements):
        return False
    node = block.statements[index]
    text = context.source.text_of(node.body[0] if isinstance(node, Line) else node)
    return "barrier(" in text or "wait_for_everyone(" in text


def _model_states(context: RuleContext, scope: Scope, expr: ast.AST) -> list[ast.Call]:
    """`<model>.state_dict()` calls inside `expr`, for prepared models."""
    found: list[ast.Call] = []
    for node in patterns.preorder(expr):
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr == "state_dict"
        ):
            # `model`, a Trainer's `self.model`, a model held on a config: `self.cfg.model`
            receiver = patterns.name_of(node.func.value) or chain_text(node.func.value)
            if receiver is not None and context.prepared_role(scope, receiver) == "model":
                found.append(node)
    return found


def _statement_of(context: RuleContext, call: ast.Call):
    for site in context.facts.index.calls():
        if site.node is call:
            return site.statement
    return None


def _runs_prepared_model(context: RuleContext, scope: Scope, site: CallSite) -> bool:
    """Is a model handed to the call (`summary(model, ...)`, which runs its forward) prepared
    there? The wrapper's forward may meet the other processes (its buffers' broadcast): it
    runs on every process, as in the original."""
    for argument in [*site.node.args, *(k.value for k in site.node.keywords)]:
        name = patterns.name_of(argument) or chain_text(argument)
        if name is not None and context.prepared_role(scope, name) == "model" and not (
            context.plan.before_prepare(site.statement, name)
        ):  # fmt: skip
            return True
    return False


def _whole_statement(site: CallSite):
    """The statement of a call that is a whole simple statement alone on its line."""
    small = site.small
    node = site.statement.node
    alone = isinstance(node, Line) and len(node.body) == 1 and node.body[0] is small
    is_call = isinstance(small, ast.Expr) and small.value is site.node
    return site.statement if alone and is_call and site.statement.block.kind != "suite" else None
