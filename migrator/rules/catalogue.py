"""Rule codes, names and summaries, derived from the rule classes (for --select and `rules`)."""

from migrator.rules import ALL_RULES

RULE_CODES: tuple[str, ...] = tuple(rule.code for rule in ALL_RULES)
FINDING_CODES: dict[str, str] = {
    "MIG900": "a training pattern was recognised but cannot be migrated safely",
    "MIG903": "torch.distributed.rpc: not data parallel training",
    "MIG904": "FSDP / tensor parallel: the model is sharded",
    "MIG905": "backward() outside a loop over a DataLoader",
    "MIG906": "several optimizers train in one loop",
    "MIG907": "native DDP code that cannot be rewritten safely",
    "MIG908": "processes started by hand without a process group (Hogwild)",
    "MIG909": "a collective or DDP option MIG010 left for a human",
    "MIG950": "a file (program) left as it is, said once at the finding that blocks it",
    "MIG952": "soundness: a side effect of the migrated program would run on every process",
    "MIG953": "soundness: a per-process value would be printed mixed, or decided on per process",
    "MIG954": "soundness: an optimizer the migrated program steps is not prepared",
}
