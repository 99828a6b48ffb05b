"""Second readings of the roles, when the first one refuses: the objects meet in the function
that makes the optimizer and receives the loaders (`_meet`), or a class's received objects are
its caller's (`_through_constructors`: a Trainer driven by its caller's loop). Each keeps its
reading when it holds, else puts the first one back.

A mixin of roles._Analyser: it reads `self.facts`, `_roles`, `_meeting_point`, `_sources`.
"""

from __future__ import annotations


class SecondReadings:
    def _through_constructors(self, per_batch: set[int], findings: list) -> None:
        """A Trainer made with its caller's objects (`trainer = Trainer(model, optimizer,
        device)` in `main()`, which loops over the loader and calls `trainer.train_step(...)`):
        `self.optimizer = optimizer` in `__init__` holds the caller's optimizer. Roles again
        with such attributes traced to what the constructions pass (origins.py); kept when
        they hold, else the first refusal stands."""
        facts = self.facts
        saved = {name: _copy(getattr(facts, name)) for name in RETRIED}
        facts.findings, facts.blocked, facts.owner, facts.meeting = (
            list(findings),
            False,
            None,
            None,
        )
        facts.optimizers, facts.models, facts.train_loaders, facts.schedulers = [], [], [], []
        facts.shared_epochs, facts.inline_loaders, facts.held_loaders = [], [], []
        facts.train_held = []
        facts.origins.clear()
        facts.homes.clear()
        facts.through_instances = True
        self._sources.clear()
        self._roles(per_batch)
        if facts.blocked:
            for name, value in saved.items():
                setattr(facts, name, value)
            facts.through_instances = False
            self._sources.clear()

    def _meet(self, per_batch: set[int], findings: list) -> None:
        facts = self.facts
        meeting = self._meeting_point()
        if meeting is None or facts.meeting is not None:
            return
        first = (list(facts.findings), facts.blocked)
        facts.findings, facts.blocked, facts.owner = list(findings), False, None
        facts.optimizers, facts.models, facts.train_loaders, facts.schedulers = [], [], [], []
        facts.meeting, facts.shared_epochs = meeting, []
        facts.origins.clear()
        facts.homes.clear()
        self._roles(per_batch)
        homed = any(home is meeting for home in facts.homes.values())  # function_homes.py
        if facts.blocked or (facts.owner is not meeting and not homed):  # the first one stands
            facts.findings, facts.blocked = first
            facts.meeting, facts.owner = None, None
            facts.origins.clear()
            facts.homes.clear()


# what a second reading of the roles resets, and puts back when the first one stands
RETRIED = ("findings", "blocked", "owner", "meeting", "optimizers", "models", "train_loaders",
           "schedulers", "shared_epochs", "inline_loaders", "held_loaders", "train_held",
           "origins", "homes")  # fmt: skip


def _copy(value):
    return type(value)(value) if isinstance(value, (list, dict)) else value
