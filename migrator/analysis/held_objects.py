"""Models held on other objects (issue 16 item 3): a Trainer that keeps the config it receives
(`self.training_config = training_config`) and trains `self.training_config.model(xb)` with
`self.training_config.optimiser`, or a `train(cfg, loader)` running `cfg.model(x)`.

The chain is the model's name (chains.py): the loop runs it, and the script places it on a
device or switches it to train mode (`self.training_config.model.to(self.device)`,
`cfg = self.training_config; cfg.model.train()`), so it is the model an optimizer built
elsewhere trains (trained_models.py), prepared where its holder is bound.

A mixin of roles._Analyser, kept in its own module for size.
"""

from __future__ import annotations

from migrator.analysis.chains import chain_text, split_chain
from migrator.analysis.facts import Origin, TrainingFacts
from migrator.analysis.index import CallSite, ModuleIndex

# Attribute calls that show a chain holds the model (trained_models.PLACING).
PLACING = ("to", "cuda", "train", "parameters")


class HeldObjects:
    facts: TrainingFacts
    index: ModuleIndex
    imports: object

    def _held_call(self, call: CallSite) -> str | None:
        """`self.cfg.model` for `self.cfg.model(x)` / `self.cfg.model.forward(x)`: the chain a
        call in the loop runs, when its root is no imported module (`nn.functional.relu`)."""
        func = call.node.func
        if call.method == "forward" and call.receiver is not None:
            func = call.receiver
        chain = chain_text(func)
        if chain is None or split_chain(chain) is None:
            return None
        root = chain.split(".")[0].split("[")[0]
        return None if self.imports.imported(root) else chain

    def _held_placed(self, origin: Origin) -> bool:
        """The chain `origin` names is placed on a device, switched to train mode or read for
        its parameters somewhere in the file (`self.training_config.model.to(self.device)`)."""
        if split_chain(origin.name) is None:
            return False
        for site in self.index.calls():
            if site.method not in PLACING or chain_text(site.receiver) is None:
                continue
            if self.facts.chain_origin(site.scope, site.receiver) == origin:
                return True
        return False
