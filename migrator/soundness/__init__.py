"""The soundness check: SPEC §3b's obligations, checked on every migrated program before it is
returned, the way black re-parses its output — but on what the program does on N processes.

`check_output(text)` reads the migrated module (a joined program included) through the same
index and program model the analysis uses and returns a finding for every obligation it
cannot establish; the engine then leaves the file (program) as it was, with those findings:
a migration is right, or it is not made. Each obligation is one module of
`migrator/soundness/`; they share `OutputModel` (model.py).
"""

from __future__ import annotations

from migrator.findings import Finding

# the codes of the obligations' findings
OBLIGATIONS = frozenset({"MIG952", "MIG953", "MIG954"})


def check_output(text: str, facts=None) -> list[Finding]:
    """The obligations the migrated `text` does not meet (findings with their nodes, in
    the output's coordinates: the engine maps them back); `facts`: the analysis of the input,
    as `OutputModel.read` takes it."""
    from migrator.soundness.model import OutputModel
    from migrator.soundness.per_process import main_only_collectives, per_process_values
    from migrator.soundness.plain_gathers import object_gathers, plain_gathers
    from migrator.soundness.side_effects import side_effects
    from migrator.soundness.split_data import split_per_process
    from migrator.soundness.training_steps import escaped_steps

    model = OutputModel.read(text, facts)
    if model is None:
        return []
    return [
        *side_effects(model),
        *per_process_values(model),
        *plain_gathers(model),
        *object_gathers(model),
        *main_only_collectives(model),
        *escaped_steps(model),
        *split_per_process(model),
    ]


def complete_outputs(text: str, context) -> tuple[str, list[Finding], list[tuple[int, int, str]]]:
    """The migrated `text` with its per-process outputs reduced (MIG032, which runs on the
    migrated text), the notes on those reductions (nodes in `text`'s coordinates) and the
    running sums reduced (each its loop's lines in `text` and its name); `import torch` is
    asked of `context` when the new code reads it."""
    from migrator.edits import EditSet
    from migrator.render import Renderer
    from migrator.rules.reduced_outputs import reduce_outputs
    from migrator.soundness.model import OutputModel

    model = OutputModel.read(text, context.facts)
    if model is None:
        return text, [], []
    torch = next((local for local, full in model.index.imports.aliases.items()
                  if full == "torch"), "torch")  # fmt: skip
    edits, notes, uses_torch = reduce_outputs(model, torch)
    if not isinstance(edits, EditSet) or edits.empty:
        return text, [], []
    if uses_torch and torch == "torch" and ("torch", None) not in context.extra_imports:
        context.extra_imports.append(("torch", None))
    return Renderer(model.source, model.index, edits).render(), notes, model.reduced_sums
