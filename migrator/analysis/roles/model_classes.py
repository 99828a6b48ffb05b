"""The nn.Module classes of this file (subclasses of `nn.Module`, or of another such class of
the file) in a training program: the trained model, its blocks, a teacher or a loss module.
Their methods run on the device prepare puts the model on, so a plain tensor they place
(`self.A_hat = torch.tensor(a).cuda()` in `__init__`, a mask made in `forward`) must land there
too (MIG002, SPEC §3b.5).

Also: the statements that construct them (`model = GraphNet(adj)`, `Trainer(Net(), ...)`),
which run the `__init__` and so place its tensors there and then.
"""

from __future__ import annotations

from migrator.analysis.catalogue import patterns
from migrator.analysis.model.instances import module_classes
from migrator.analysis.roles.facts import TrainingFacts
from migrator.analysis.syntax.imports import dotted_name
from migrator.analysis.syntax.index import Scope, Statement


def model_classes(facts: TrainingFacts) -> list[Scope]:
    classes = module_classes(facts.index)
    imports = facts.index.imports
    found: list[Scope] = []
    changed = True
    while changed:  # `class Block(Base)` after `class Base(nn.Module)`
        changed = False
        for cls in classes.values():
            if cls in found:
                continue
            for base in cls.node.bases:
                name = dotted_name(base) or ""
                own = classes.get(name)
                if patterns.last_part(imports.qualify(base) or "") == "Module" or (
                    own is not None and own in found
                ):
                    found.append(cls)
                    changed = True
                    break
    return found


def model_methods(facts: TrainingFacts) -> list[Scope]:
    return [m for cls in model_classes(facts) for m in cls.children if m.kind == "function"]


def constructions(facts: TrainingFacts) -> list[Statement]:
    """The statements that construct an instance of a module class of this file."""
    index = facts.index
    found: dict[int, Statement] = {}
    for cls in model_classes(facts):
        for site in index.calls_named(cls.name):
            if site.scope.parent is not cls and not site.scope.within(cls):
                found[id(site.statement)] = site.statement
    return list(found.values())
