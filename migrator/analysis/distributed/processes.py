"""Processes a script starts, or is started in, without a process group MIG010 can take over:
`mp.Process(...)` started by hand (Hogwild, or a group joined by hand), and a rank-first worker
handed its model by another module (mnist_hogwild's train.py). A part of distributed.py's
reader, kept in its own module for size."""

from __future__ import annotations

from migrator.analysis.distributed.facts import (
    DDP_CLASSES,
    INIT,
    PROCESS_CLASSES,
    WORKER_RANK,
    DistributedFacts,
)
from migrator.analysis.syntax.index import ModuleIndex


class ProcessReader:
    index: ModuleIndex
    facts: DistributedFacts
    sites: list

    def _block(self, node, code: str, message: str, level: str = "warning") -> None:
        raise NotImplementedError

    def _processes_started_by_hand(self) -> None:
        for site, qualified in self.sites:
            if qualified not in PROCESS_CLASSES:
                continue
            if any(q == INIT for _, q in self.sites):
                self._block(site.node, "MIG907", "processes started by hand with Process(...) "
                            "join a process group; launch with `migrate launch` and migrate by "
                            "hand")  # fmt: skip
            else:
                self._block(site.node, "MIG908", "processes started by hand share a model "
                            "without a process group (Hogwild): nothing for Accelerate to take "
                            "over; left as it is", level="note")  # fmt: skip
            return

    def _worker_started_elsewhere(self) -> None:
        """`def train(rank, args, model, ...)`: a function taking a process rank first and the
        model it trains as an argument, that nothing in this file calls, in a file that joins no
        process group. Another module starts one process per rank around one shared model
        (Hogwild, as pytorch/examples' mnist_hogwild): not data parallel training."""
        if self.facts.blocking or any(q == INIT or q in DDP_CLASSES for _, q in self.sites):
            return
        for scope in self.index.module_scope.children:
            params = [p for p in scope.params if not p.startswith("*")]
            if scope.kind != "function" or not params or not WORKER_RANK.match(params[0]):
                continue
            if any(other.uses.get(scope.name) for other in self.index.scopes):
                continue  # called or handed on here (`Process(target=train)`): seen there
            shared = next((p for p in params[1:] if any(
                u.kind == "attr" and u.attr == "parameters" for u in scope.uses.get(p, [])
            )), None)  # fmt: skip
            if shared is None:
                continue
            self._block(scope.node, "MIG908", f"`{scope.name}({params[0]}, ...)` is a worker "
                        f"another module starts once per process around the shared "
                        f"`{shared}` it is handed, with no process group (Hogwild): nothing "
                        "for Accelerate to take over; left as it is", level="note")  # fmt: skip
            return
