"""MIG009's randomness that must differ per process (SPEC §3b.6): a program that seeds its RNGs
with one constant (`torch.manual_seed(999)`, `np.random.seed(seed)`, `set_seed(args.seed)`)
seeds them alike on every process, so every process would draw the same GAN noise, the same
dropout masks and augmentations - N copies of one draw where N separate runs draw N. Right
after the prepare, each process other than the first seeds again with the same call, offset
by its index:

    model, optimizer, loader = accelerator.prepare(model, optimizer, loader)
    if accelerator.process_index:  # each process draws its own randomness from here on
        torch.manual_seed(999 + accelerator.process_index)

Where the prepare sees no seed (the program seeds nothing, or seeds in another function),
torch's generators still start alike on every process (CUDA's from one fixed seed, the CPU's
too in most builds), so torch alone is seeded again from where it started:
`torch.manual_seed(torch.initial_seed() + accelerator.process_index)`. Randomness counts where
the program draws while training (noise in the loop or in what it calls, `forward`,
`__getitem__`), has dropout in its models or applies torchvision's random transforms.

Process 0 keeps the original's stream (one process runs exactly as the original did), and the
set-up before the prepare (splits, initial weights) still agrees everywhere. A seed that
already names the rank is left, and so is a program that ran data-parallel already
(hand-written DDP seeding its ranks alike did so by its own choice), and a loaderless loop's
random batches are its data: whether processes draw alike is MIG905's note, not changed
here. Where the prepare is in a function that runs more than once (`train_epoch()` building
its loader at each epoch, a `fit()` per fold) and seeds nothing itself, `initial_seed() + k`
there would restart each process's stream at every call: none is added, and the note says so
(a function that seeds itself at each call, `torch.manual_seed(width)`, gets its offset)."""

from __future__ import annotations

import ast

from migrator.analysis.catalogue.randomness import (
    EVERY_RNG,
    OTHER_SEEDS,
    PER_PROCESS,
    TORCH_SEEDS,
    is_draw,
    is_seed,
    random_layer,
    rng_of,
)
from migrator.analysis.model.origins import calls_of
from migrator.analysis.syntax.index import Line
from migrator.analysis.syntax.points import file_part
from migrator.findings import Finding
from migrator.rules.base import RuleContext

LOOPS = (ast.For, ast.AsyncFor, ast.While)


def offset_seeds(context: RuleContext) -> None:
    """The reseeding after the prepare, with a note, where the program seeds alike."""
    plan = context.plan
    if plan is None or plan.block is None or not plan.objects:
        return
    if context.facts.distributed.present:
        return  # hand-written DDP seeded its ranks alike itself: the original's choice stays
    if not any(context.prepared(name) for name in context.facts.loaders):
        return  # loaderless: what each process draws is its data, as MIG905's note says
    draws = _draws_while_training(context)
    if not (draws or _random_layers(context)):
        return
    calls = _seed_calls(context, plan.block.scope, plan.block, plan.index)
    if calls is None or _seeds_per_process(context):
        return  # the program seeds per process already
    own = {id(site.node) for site in plan.block.scope.calls}  # seeds it runs at each call
    again = None if any(id(c) in own for c in calls) else _runs_again(context, plan.block.scope)
    if again is not None:  # `initial_seed() + k` there would restart k's stream at every call
        loops = context.facts.training_loops
        context.findings.append(Finding(code="MIG009", level="note",
                                        node=loops[0].node if loops else None, message=(
            "the program trains with randomness (noise, dropout or augmentations) that every "
            "process draws alike (N copies of one draw); the prepare is in "
            f"`{plan.block.scope.name}()`, which runs {again}, where seeding each process "
            "apart would restart its stream at every call: no seed is added, so each process "
            "draws the same; to draw apart, seed once per run by hand "
            "(`torch.manual_seed(seed + accelerator.process_index)`)")))  # fmt: skip
        return
    index = context.accelerator_expr("process_index")
    if not calls:
        if draws != {"numpy", "random"} and draws != {"numpy"} and draws != {"random"}:
            _offset_torch(context, plan, index)  # NumPy's and Python's start from entropy
        return
    lines = [
        f"{context.source.text_of(call.func)}({context.source.text_of(call.args[0])} + {index})"
        for call in calls
    ]
    body = "".join(f"    {line}\n" for line in lines)
    code = f"if {index}:  # each process draws its own randomness from here on\n{body}"
    context.edits.insert(plan.block.holder, plan.index, context.statement(code), priority=20)
    context.need_accelerator_before(plan.block, plan.index, "accelerator.prepare(...)")
    shown = ", ".join(f"`{context.source.text_of(call)}`" for call in calls)
    context.findings.append(Finding(code="MIG009", level="note", node=calls[0], message=(
        f"{shown} {'seed' if len(calls) > 1 else 'seeds'} every process alike: each would draw the same noise, dropout and "
        "augmentations (N copies of one draw); after the prepare, process k > 0 seeds again "
        "with the seed + k, so each draws its own, while process 0 keeps the original's stream "
        "and the set-up before the prepare agrees everywhere")))  # fmt: skip


def _runs_again(context: RuleContext, scope) -> str | None:
    """How a function runs more than once per run (`train_epoch()` called in the epoch loop,
    a `fit()` called for each fold, from two places); None when once, or not a function."""
    if scope.kind != "function":
        return None
    sites = calls_of(context.facts.index, scope)
    if any(isinstance(s.node, LOOPS) for site in sites for s in site.statement.chain()[:-1]):
        return "in a loop (once per pass)"
    return "from several calls" if len(sites) > 1 else None


def _offset_torch(context: RuleContext, plan, index: str) -> None:
    """No seed the prepare can read (none at all, or one set elsewhere): torch's generators
    still start alike on every process (CUDA's from one fixed seed, and the CPU's too in
    most builds), so process k > 0 seeds torch again from where it started, plus k."""
    torch = context.torch_name()
    code = (
        f"if {index}:  # each process draws its own randomness from here on\n"
        f"    {torch}.manual_seed({torch}.initial_seed() + {index})\n"
    )
    context.edits.insert(plan.block.holder, plan.index, context.statement(code), priority=20)
    context.need_accelerator_before(plan.block, plan.index, "accelerator.prepare(...)")
    loops = context.facts.training_loops
    node = loops[0].node if loops else None
    context.findings.append(Finding(code="MIG009", level="note", node=node, message=(
        "the program trains with randomness (noise, dropout or augmentations) from torch's "
        "generators, and nothing seeds them apart per process: CUDA's starts from one fixed "
        "seed on every process, and so does the CPU's in stock PyTorch builds (some builds "
        "seed it at random per process), so each process would draw the same (N copies of "
        "one draw); after the prepare, process k > 0 seeds torch again with its starting "
        "seed + k, so each draws its own, while process 0 keeps the original's stream")))  # fmt: skip


def _random_layers(context: RuleContext) -> bool:
    """Randomness the program draws through torch without naming a draw: dropout in its
    models (`nn.Dropout(...)`, `F.dropout(...)`, a library model that trains with dropout:
    `BertForQuestionAnswering.from_pretrained(...)`, `models.vgg16()`,
    `nn.TransformerEncoderLayer(d, h)`) and torchvision's random transforms
    (`transforms.RandomCrop`, `ColorJitter`), which the loader's workers apply; in this
    module or in another module of the program."""
    imports = context.facts.index.imports
    if any(
        random_layer(site.node, imports.qualify(site.node.func) or "")
        for site in context.facts.index.calls()
    ):
        return True
    # a helper of the project's other modules (a `dataset.py` whose transforms augment)
    layers = imports.helper_random_layers
    return bool(layers) and any(
        layers.get(imports.qualify(site.node.func) or "") for site in context.facts.index.calls()
    )


def _draws_while_training(context: RuleContext) -> set[str]:
    """A random draw (torch's, NumPy's or Python's RNG) in a loop, or in a function a loop
    calls, at any depth, or in a `forward` / `__getitem__`: noise, random batches,
    augmentations drawn while training. A program whose randomness is all set-up needs no
    reseeding."""
    index = context.facts.index
    imports = index.imports
    calls: dict[str, set[str]] = {}  # function name -> names it calls
    in_loops: set[str] = {"forward", "__getitem__"}
    draws: list = []
    for site in index.calls():
        called = site.node.func
        name = called.attr if isinstance(called, ast.Attribute) else getattr(called, "id", None)
        looped = any(isinstance(s.node, LOOPS) for s in site.statement.chain())
        if name is not None:
            if looped:
                in_loops.add(name)
            if site.scope.kind == "function":
                calls.setdefault(site.scope.name, set()).add(name)
        qualified = imports.qualify(called) or ""
        if is_draw(qualified):
            draws.append((site, looped))
    reached = set(in_loops)
    while True:  # what the functions loops call call in turn
        more = {n for caller in reached for n in calls.get(caller, ())} - reached
        if not more:
            break
        reached |= more
    return {
        rng_of(imports.qualify(site.node.func) or "")
        for site, looped in draws
        if looped or (site.scope.kind == "function" and site.scope.name in reached)
    }


def _seeds_per_process(context: RuleContext) -> bool:
    """A seed anywhere in the program that names the rank (`seed + rank`)."""
    imports = context.facts.index.imports
    return any(
        is_seed(imports.qualify(site.node.func) or "")
        and any(word in ast.unparse(a) for a in site.node.args for word in PER_PROCESS)
        for site in context.facts.index.calls()
    )


def _seed_calls(context: RuleContext, scope, block, index: int) -> list[ast.Call] | None:
    """The seeding calls run before the prepare point, in its scope (or at module level
    before it), outside loops, each with one seed the prepare point can read; None where the
    program seeds per process already."""
    imports = context.facts.index.imports
    tree = context.facts.index.tree
    statement = (
        block.statements[min(index, len(block.statements) - 1)] if block.statements else None
    )
    point = _first_line(statement) if statement is not None else getattr(scope.node, "lineno", 0)
    found = []
    for site in context.facts.index.calls():
        call = site.node
        qualified = imports.qualify(call.func) or ""
        own = qualified.rsplit(".", 1)[-1] in EVERY_RNG
        if qualified not in TORCH_SEEDS | OTHER_SEEDS and not own:
            continue
        if len(call.args) != 1 or call.keywords or isinstance(call.args[0], ast.Starred):
            continue
        if site.scope is not scope and site.scope.kind != "module":
            continue
        if file_part(tree, call.lineno) != file_part(tree, point):
            continue  # module code of another file of the program: its names are not here
        if any(
            isinstance(s.node, (ast.For, ast.AsyncFor, ast.While)) for s in site.statement.chain()
        ):
            continue
        if not _before(site.statement, block, index):
            continue
        text = context.source.text_of(call.args[0])
        if any(word in text for word in PER_PROCESS):
            return None  # the program seeds per process already
        if not context.processes.runs_on_every_process(site.statement):
            continue
        if not _readable(call.args[0], site.scope, scope):
            continue
        found.append(call)
    return found


def _first_line(statement) -> int:
    node = statement.body[0] if isinstance(statement, Line) else statement
    return getattr(node, "lineno", 0)


def _before(statement, block, index: int) -> bool:
    """Runs before the statement at `block.statements[index]`: in that block or an enclosing
    one, at an earlier position (module code before a function's prepare runs first too)."""
    for outer in statement.chain():
        if outer.block is block:
            return outer.index < index
    return statement.block.scope.kind == "module" and block.scope.kind != "module"


def _readable(seed: ast.expr, made_in, scope) -> bool:
    """Every name the seed reads is a parameter or binding of the prepare's scope, or a
    module-level name, so the same expression can be evaluated again there."""
    for node in ast.walk(seed):
        if isinstance(node, ast.Name):
            if node.id in scope.params or scope.assigns(node.id):
                continue
            module = scope
            while module.parent is not None:
                module = module.parent
            if not module.assigns(node.id) and made_in is not module:
                return False
    return True
