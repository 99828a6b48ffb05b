"""A DistributedSampler handed to a function of the program that only `set_epoch`s it
(`train(model, loader, optimizer, sampler=sampler)`; inside, `sampler.set_epoch(epoch)`): the
prepared loader reshuffles each epoch by itself, so the calls go and the argument becomes
None, as a loader factory's returned sampler does (`Sampler.returned`)."""

from __future__ import annotations

from migrator.analysis.distributed.facts import Sampler, whole_statement
from migrator.analysis.model.origins import argument_for, calls_of, handed_to_parameter
from migrator.analysis.syntax.index import Scope
from migrator.analysis.syntax.views import name_value


def handed_to_set_epoch(reader, use, scope: Scope, name: str, sampler: Sampler) -> bool:
    if use.kind != "arg" or use.call is None:
        return False
    handed = handed_to_parameter(reader.index, use, scope)
    if handed is None:
        return False
    function, parameter = handed
    removed = []
    for current in [function, *function.descendants()]:
        if current is not function and current.is_local(parameter):
            continue
        for inner in current.uses.get(parameter, []):
            call = inner.call if inner.kind == "attr" and inner.attr == "set_epoch" else None
            site = next((s for s, _ in reader.sites if s.node is call), None)
            if site is None or not whole_statement(site):
                return False
            removed.append(site)
    for site in calls_of(reader.index, function):  # every caller hands this sampler, or none
        argument = argument_for(site.node, function, parameter)
        if argument is not None and name_value(argument) not in (name, "None"):
            return False
    reader.facts.removed_calls.extend(removed)
    sampler.returned.append(use.node)
    return True
