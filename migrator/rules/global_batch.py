"""The note of MIG006 that says what preparing the training loader does to the batch (SPEC
§3b.8): once per program, at the prepare of its training loader.

A prepared loader hands each of the N processes its own batches of the loader's batch size B
(Accelerate's default, `split_batches=False`): one optimizer step then sees N × B samples, an
epoch takes 1/N of the steps, and learning rates tuned for B may need scaling. The original's
batch is kept by splitting the batches (`DataLoaderConfiguration(split_batches=True)`) or by a
batch size divided by N. B is named where the `DataLoader(...)` that makes the loader can be
read (through aliases and the program's functions that return loaders).

Not said where the original was data-parallel already: hand-written DDP with a
`DistributedSampler` took B per process too (its global batch is unchanged). Where it was
`nn.DataParallel`, which split each batch of B over the GPUs, the note says the per-process
batch is now B and the global one N × B; where it was DDP whose processes each read the whole
set, that the global batch stays N × B while an epoch takes 1/N of the steps.
"""

from __future__ import annotations

import ast

from migrator.analysis.model.loader_values import LoaderValues
from migrator.analysis.syntax.index import Line
from migrator.analysis.syntax.views import keyword, positional
from migrator.findings import Finding

CODE = "MIG006"
SPLIT = "`Accelerator(dataloader_config=DataLoaderConfiguration(split_batches=True))`"


def global_batch_note(context, prepared: list[tuple[list, object]]) -> Finding | None:
    """The note, at the first prepare (`prepared`: (what it prepares: loader names or
    `DataLoader(...)` calls, the statement it goes before) in source order) that prepares a
    loader a training loop draws from; None where none is prepared or the original's processes
    already took a batch each."""
    facts = context.facts
    if facts.loaderless or facts.distributed.samplers:
        return None
    training = _training_items(facts)
    for items, statement in sorted(prepared, key=lambda p: _position(p[1])):
        loaders = [item for item in items if _key(item) in training]
        if loaders:
            return _note(context, loaders, statement)
    return None


def _training_items(facts) -> set:
    """The names of the loaders training loops draw from, and the `DataLoader(...)` calls
    they draw from where the loader has no name (built in place, held by a container)."""
    found: set = set(facts.train_loaders)
    found |= {id(call) for call, _statement in facts.inline_loaders}
    found |= {id(value) for value in facts.train_held}
    return found


def _key(item) -> object:
    return item if isinstance(item, str) else id(item)


def _note(context, loaders: list, statement) -> Finding:
    named = [item for item in loaders if isinstance(item, str)]
    which = ", ".join(f"`{name}`" for name in named) or "the training DataLoader"
    prepared = f"{which} {'is' if len(named) <= 1 else 'are'} prepared"
    b, per = _batch_words(_sizes(context, loaders, statement))
    if context.facts.distributed.wraps:  # DDP already, each process reading the whole set
        message = (
            f"{prepared}: each of the N processes now draws its own share of the data in "
            f"{per}, so an epoch takes 1/N of the steps (the original's DDP processes each "
            f"read the whole set); the global batch is N × {b}, as under the original's DDP "
            f"on N processes (on one process it was {b})"
        )
        return Finding(code=CODE, level="note", node=_node(statement), message=message)
    if context.data_parallel_removed:
        what = (f"nn.DataParallel split each batch of {b} over the GPUs; now each of the N "
                f"processes draws its own {per}, so the per-process batch is {b}, the global "
                f"batch N × {b} (DataParallel's was {b}),")  # fmt: skip
    else:
        what = (f"each of the N processes now draws its own {per}, so the global batch is "
                f"N × {b}")  # fmt: skip
    message = (
        f"{prepared}: {what} and an epoch takes 1/N of the steps (learning rates tuned for "
        f"{b} may need scaling); to keep the original's batch of {b}, split the batches "
        f"({SPLIT}, or `MIGRATE_SPLIT_BATCHES=1` on our runtime) or divide the batch size by N"
    )
    sizes = _sizes(context, loaders, statement)
    elsewhere = _sized_elsewhere(context, sizes[0]) if len(sizes) == 1 and sizes[0] else None
    if elsewhere is not None:  # `labels = torch.arange(batch_size)`: B is the batch's rows
        line, text = elsewhere
        message += (
            f"; but `{text}` at line {line} builds a tensor of {b} rows, which a batch split "
            f"over the processes no longer has: read the size from the batch (`x.size(0)`) first"
        )
    return Finding(code=CODE, level="note", node=_node(statement), message=message)


def _sized_elsewhere(context, size: str) -> tuple[int, str] | None:
    """(line, call) of a torch call outside the DataLoader that is handed the batch size
    itself (`torch.arange(args.batch_size)`, `torch.zeros(batch_size, 1)`), the first one."""
    bare = _bare(size)
    imports = context.facts.index.imports
    for site in context.facts.index.calls():
        qualified = imports.qualify(site.node.func) or ""
        if not qualified.startswith("torch.") or qualified.startswith("torch.utils.data"):
            continue
        arguments = [*site.node.args, *(k.value for k in site.node.keywords)]
        if any(ast.unparse(a) == bare for a in arguments):
            return site.node.lineno, context.source.text_of(site.node)
    return None


def _sizes(context, loaders: list, statement) -> list[str | None]:
    """The batch sizes of the `DataLoader(...)` calls the prepared training loaders come
    from, as written."""
    facts = context.facts
    values = LoaderValues(facts.index)
    sizes: list[str | None] = []
    for item in loaders:
        for call in _made_by(facts, values, item, statement.block.scope):
            size = _batch_size(context, call)
            if size not in sizes:
                sizes.append(size)
    return sizes


def _batch_words(sizes: list[str | None]) -> tuple[str, str]:
    """(B as the note names it, "batches of ..." as each process draws them)."""
    if len(sizes) == 1 and sizes[0] is not None:
        return f"`{_bare(sizes[0])}`", f"batches of `{sizes[0]}`"
    if sizes and None not in sizes:
        listed = ", ".join(f"`{_bare(size)}`" for size in sizes)
        return f"B ({listed})", "batches of its batch size B"
    return "B", "batches of its batch size B"


def _made_by(facts, values: LoaderValues, item, scope) -> list[ast.Call]:
    """The `DataLoader(...)` calls a prepared loader (a name, or the expression prepared in
    place, read in `scope`) comes from."""
    if not isinstance(item, str):
        return values.calls_in(scope, item)
    home = facts.homes.get(item, facts.owner)
    found = facts.origin(home, item) if home is not None else None
    if found is None:
        return []
    return values.made_by(found.scope, found.name)


def _batch_size(context, call: ast.Call) -> str | None:
    """`batch_size=args.batch_size` as written, the DataLoader's default (1), or None where
    a batch sampler decides."""
    if keyword(call, "batch_sampler") is not None:
        return None
    given = keyword(call, "batch_size")
    if given is not None:
        return f"batch_size={context.source.text_of(given.value)}"
    found = positional(call)
    if len(found) > 1:
        return context.source.text_of(found[1].value)
    return "batch_size=1"


def _bare(size: str) -> str:
    return size.removeprefix("batch_size=")


def _node(statement) -> ast.AST:
    node = statement.node
    return node.body[0] if isinstance(node, Line) else node


def _position(statement) -> tuple[int, int]:
    node = _node(statement)
    return node.lineno, node.col_offset
