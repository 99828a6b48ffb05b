"""One epoch function for training and evaluation: `run_epoch(model, loader, *,
optimizer=None, ...)` trains when a call passes the optimizer and evaluates when it does not
or passes `None` (`train_mode = optimizer is not None`), or is switched by a flag (`_run_epoch(loader,
train=False)`, each call passing a literal or the default), so its loader parameter receives
several loaders.

The loader the training call passes is the training loader, prepared where it is made, with the
model and optimizer, in the function where they all meet (the caller). The loaders the other
calls pass stay plain: every process evaluates the whole set and gets the same metrics, which
a plateau scheduler, early stopping or a best-model choice read (per-process shards would make
the processes decide differently); the loop keeps its `.to(device)` for them, the device
now the accelerator's (MIG002), where the training batches already are. A note says so.

A mixin of LoopAnalysis (loops.py), beside LoopSources: it reads `self.index`, `self.facts`,
`_calls_reachable`; roles.py asks it for a loop's loader its origin cannot name.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass

from migrator.analysis.catalogue import patterns
from migrator.analysis.model.origins import (
    Origin,
    argument_for,
    call_sites_of,
    none_default,
    param_default,
    passes_none,
)
from migrator.analysis.roles.facts import TrainingFacts
from migrator.analysis.syntax.index import CallSite, ModuleIndex, Scope

TRAIN_FLAG = re.compile(r"^(is_)?train(ing)?(_mode)?$")


@dataclass(eq=False)
class SharedEpoch:
    """`function`'s `param` receives `train` from its training calls and `evaluated` from the
    calls that pass no optimizer; all are made in `caller`."""

    function: Scope
    param: str
    caller: Scope
    train: str
    evaluated: list[str]


class SharedEpochs:
    facts: TrainingFacts
    index: ModuleIndex

    def _shared_loader(self, scope: Scope, name: str) -> Origin | None:
        """The training loader behind `name`, a loader parameter of a train/eval epoch
        function its callers feed several loaders (None: not that shape)."""
        if scope.kind != "function" or name not in scope.params:
            return None
        sites = call_sites_of(self.index, scope)
        steppers = [  # `optimizer=None`, or `None` passed by a call (`run(m, val, None)`)
            p for p in scope.params
            if (none_default(scope, p) or any(passes_none(argument_for(s.node, scope, p)) for s in sites))
            and self._steps(scope, p)
        ]  # fmt: skip
        flag = _train_flag(scope) if not steppers else None
        if (not steppers and flag is None) or len(sites) < 2:
            return None
        trained: list[Origin] = []
        evaluated: list[Origin] = []
        for site in sites:
            origin = self._passed(site, scope, name)
            if origin is None:
                return None
            if flag is not None:  # `train=True` / `train=False` (or the default)
                value = argument_for(site.node, scope, flag)
                value = param_default(scope, flag) if value is None else value
                if not (isinstance(value, ast.Constant) and isinstance(value.value, bool)):
                    return None
                (trained if value.value else evaluated).append(origin)
                continue
            passed = [argument_for(site.node, scope, p) for p in steppers]
            training = [a is not None and not passes_none(a) for a in passed]
            (trained if any(training) else evaluated).append(origin)
        found = {(id(o.scope), o.name) for o in trained}
        callers = {id(o.scope) for o in trained + evaluated}
        if len(found) != 1 or len(callers) != 1 or not evaluated:
            return None
        train = trained[0]
        others = list(dict.fromkeys(o.name for o in evaluated if o.name != train.name))
        shared = SharedEpoch(scope, name, train.scope, train.name, others)
        if not any(s.function is scope and s.param == name for s in self.facts.shared_epochs):
            self.facts.shared_epochs.append(shared)
        return train

    def _passed(self, site: CallSite, function: Scope, param: str) -> Origin | None:
        argument = argument_for(site.node, function, param)
        name = patterns.name_of(argument)
        return self.facts.origin(site.scope, name) if name is not None else None

    def _steps(self, function: Scope, param: str) -> bool:
        """Whether the function steps `param` (`optimizer.step()`, `scaler.step(optimizer)`)."""
        for call in self._calls_reachable(function.calls):
            if call.method != "step" or call.scope is not function:
                continue
            args = [patterns.name_of(a.value) for a in patterns.call_args(call.node)]
            if patterns.name_of(call.receiver) == param or param in args:
                return True
        return False


def _train_flag(function: Scope) -> str | None:
    """`train: bool = True`: the parameter that says whether a call trains, read by an `if`
    in the function (`if train: optimizer.step()`, or handed on to the step function)."""
    for param in function.params:
        default = param_default(function, param)
        if (
            TRAIN_FLAG.match(param)
            and isinstance(default, ast.Constant)
            and isinstance(default.value, bool)
            and not function.assigns(param)
            and param in function.uses
        ):
            return param
    return None
