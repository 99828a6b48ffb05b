"""MIG009 shared split: a data set split at random from an RNG nothing seeded
(`random_split(data, [n_train, n_val])`, scikit-learn's `train_test_split(x, y)`), where every
process runs it, draws a different split on each process: rank 0's validation samples are
rank 1's training samples, and the prepared loaders shard sets that do not add up to the
original's (SPEC §3b.6: randomness that must agree is made to agree). The split gets a fixed
seed, the same on every process - `generator=torch.Generator().manual_seed(0)`,
`random_state=0` - with a note: the original drew a new split each run.

The same holds for the data a program orders or picks at random once, while it sets up
(`idx = np.random.permutation(n)`, `random.shuffle(files)` in a Dataset's `__init__`,
`df.sample(frac=1)`, `torch.randperm(n)`): each process would hold its data in another order,
and a loader sharded by index would hand one sample to two processes and none to another.
Such a call - outside any loop, in module code or a function only called outside loops (not
a Dataset's `__getitem__`: per-sample randomness is left) - draws from its own RNG with seed
0: `np.random.RandomState(0).permutation(n)`, `random.Random(0).shuffle(files)`,
`random_state=0`, `generator=torch.Generator().manual_seed(0)`.

A file that seeds the RNG the split draws from (`torch.manual_seed`, `np.random.seed`,
`random.seed`, `set_seed`, `seed_everything`) before the split runs - read where one scope
reaches both; anywhere, where none does - is taken as drawing alike on every process, and a
split given its own generator or `random_state` is left as it is."""

from __future__ import annotations

import ast

from migrator.analysis.catalogue.randomness import (
    EVERY_RNG,
    NUMPY_SEEDS,
    PYTHON_SEEDS,
    TORCH_SEEDS,
    is_draw,
    is_seed,
)
from migrator.analysis.model.origins import calls_of
from migrator.arglists import call_items
from migrator.findings import Finding
from migrator.rules.base import Rule, RuleContext
from migrator.rules.main_process_writes import every_process_scopes
from migrator.rules.process_seeds import LOOPS, offset_seeds

TORCH_SPLITS = {"torch.utils.data.random_split", "torch.utils.data.dataset.random_split"}
SKLEARN_SPLITS = {"sklearn.model_selection.train_test_split"}
SKLEARN_DRAWS = {"sklearn.utils.resample", "sklearn.utils.shuffle"}  # given `random_state=`
TORCH_DRAWS = {"torch.randperm"}  # given `generator=`
NUMPY_DRAWS = {"numpy.random.permutation", "numpy.random.shuffle", "numpy.random.choice"}
PYTHON_DRAWS = {"random.shuffle", "random.sample"}  # from an own `random.Random(0)`
CLOCKS = {"time.time", "time.time_ns", "time.perf_counter", "datetime.datetime.now"}
DRAWS = (TORCH_SPLITS | SKLEARN_SPLITS | SKLEARN_DRAWS | TORCH_DRAWS | NUMPY_DRAWS
         | PYTHON_DRAWS)  # fmt: skip


class SharedSplit(Rule):
    code = "MIG009"
    name = "shared-split"
    summary = "a random split every process draws gets one seed, the same on every process"
    triggers = ("random_split", "train_test_split", "permutation", "shuffle", "choice",
                "sample", "randperm", "seed")  # fmt: skip

    def apply(self, context: RuleContext) -> None:
        offset_seeds(context)  # randomness that must differ per process (process_seeds.py)
        if not any(context.prepared(name) for name in context.facts.loaders):
            return  # nothing is sharded: each process's split is its own business
        imports = context.facts.index.imports
        seeds = [(name, _lines_by_scope(context, site)) for name, site in _alike_seeds(context)]
        for scope in every_process_scopes(context):
            for site in scope.calls:
                qualified = imports.qualify(site.node.func) or ""
                if qualified not in DRAWS and not _data_frame_sample(site.node):
                    continue
                called = {name for name, lines in seeds if _runs_before(context, lines, site)}
                seeded_torch = bool(called & TORCH_SEEDS) or _seeds_every_rng(called)
                seeded_numpy = bool(called & NUMPY_SEEDS) or _seeds_every_rng(called)
                seeded_python = bool(called & PYTHON_SEEDS) or _seeds_every_rng(called)
                if qualified in TORCH_SPLITS and not seeded_torch:
                    self._seed(context, site, "generator", _generator(context), "torch")
                elif qualified in SKLEARN_SPLITS and not seeded_numpy:
                    self._seed(context, site, "random_state", "0", "NumPy")
                elif qualified in SKLEARN_DRAWS and not seeded_numpy:
                    if _once_at_set_up(context, scope, site):
                        self._seed(context, site, "random_state", "0", "NumPy", False)
                elif not _once_at_set_up(context, scope, site):
                    continue
                elif qualified in TORCH_DRAWS and not seeded_torch:
                    self._seed(context, site, "generator", _generator(context), "torch", False)
                elif _data_frame_sample(site.node) and not seeded_numpy:
                    self._seed(context, site, "random_state", "0", "NumPy", False)
                elif qualified in NUMPY_DRAWS and not seeded_numpy:
                    self._own_rng(context, site, "RandomState(0)", "NumPy")
                elif qualified in PYTHON_DRAWS and not seeded_python:
                    self._own_rng(context, site, "Random(0)", "Python")

    def _own_rng(self, context: RuleContext, site, maker: str, rng: str) -> None:
        """`np.random.permutation(n)` -> `np.random.RandomState(0).permutation(n)`,
        `random.shuffle(x)` -> `random.Random(0).shuffle(x)`: the same method of an RNG of
        its own, seeded alike on every process."""
        func = site.node.func
        if not isinstance(func, ast.Attribute) or not context.processes.runs_on_every_process(
            site.statement
        ):
            return
        module = func.value
        context.edits.replace(module, lambda text, _r: f"{text}.{maker}")
        seeded = f"`{context.source.text_of(module)}.{maker}`"
        context.findings.append(Finding(code="MIG009", level="note", node=site.node,
                                        message=_set_up_note(rng, seeded)))  # fmt: skip

    def _seed(
        self, context: RuleContext, site, keyword: str, value: str, rng: str, split: bool = True
    ) -> None:
        call = site.node
        if any(k.arg in (keyword, None) for k in call.keywords):
            return  # its own generator, or keywords passed through `**`
        if not context.processes.runs_on_every_process(site.statement):
            return

        def rewrite(_text: str, renderer, call=call) -> str:
            return call_items(renderer, call).appended(f"{keyword}={value}").render()

        context.edits.rewrite(call, rewrite)
        context.findings.append(Finding(code="MIG009", level="note", node=call, message=(
            f"this split draws from the {rng} RNG, which nothing seeds before it: on N processes "
            "each would "
            f"draw its own split (one process's validation samples another's training "
            f"samples); it is drawn with `{keyword}={value}` on every process - the original drew "
            "a new split each run") if split else _set_up_note(rng, f"`{keyword}={value}`")))  # fmt: skip


def _set_up_note(rng: str, seeded: str) -> str:
    return (
        f"this draws from the {rng} RNG, which nothing seeds before it, while the data is set "
        "up: on N "
        "processes each would order or pick its data its own way (a loader sharded by index "
        "would then give some samples to two processes and others to none); it draws with "
        f"{seeded} on every process - the original drew anew each run"
    )


def _once_at_set_up(context: RuleContext, scope, site, seen: frozenset = frozenset()) -> bool:
    """Outside any loop, in module code or a function (a Dataset's `__init__`) that is only
    called outside loops: it runs once, while the data is set up."""
    if any(isinstance(s.node, LOOPS) for s in site.statement.chain()[:-1]):
        return False
    if scope.kind == "module":
        return True
    if scope.kind != "function" or id(scope) in seen:
        return False
    cls = scope.parent
    name = scope.name
    if cls is not None and cls.kind == "class":
        if name != "__init__":
            return False  # `__getitem__`, `__iter__`: randomness per sample or pass
        name = cls.name
    sites = context.facts.index.calls_named(name)
    return bool(sites) and all(
        _once_at_set_up(context, other.scope, other, seen | {id(scope)}) for other in sites
    )


def _data_frame_sample(call: ast.Call) -> bool:
    """`df.sample(frac=1)`: pandas's sampling (its `frac=` names it), without a random_state."""
    func = call.func
    return (
        isinstance(func, ast.Attribute)
        and func.attr == "sample"
        and any(k.arg == "frac" for k in call.keywords)
    )


def _alike_seeds(context: RuleContext) -> list[tuple[str, object]]:
    """The calls of seeding functions with a seed that is the same on every process (each
    with its qualified name): not one drawn at random itself (`np.random.seed(random.randint(
    1, 100))`, a seed bound to such a draw or to the clock), which seeds each process apart."""
    imports = context.facts.index.imports
    found = []
    for site in context.facts.index.calls():
        qualified = imports.qualify(site.node.func) or ""
        if not is_seed(qualified):
            continue
        if not any(_drawn(context, site.scope, a, 0) for a in site.node.args):
            found.append((qualified, site))
    return found


def _runs_before(context: RuleContext, seeds: dict[int, list[int]], draw) -> bool:
    """Does the seeding call run before the draw? Read in the innermost scope reaching both
    (`set_seed(42)` in `main()` after `loaders = make_loaders()` whose split draws first, h8
    name_classifier: no); where no scope reaches both, yes, unless the module's code reaches
    the draw and not the seed (a seeding function nothing calls)."""
    draws = _lines_by_scope(context, draw)  # `seeds`: the seeding call's, by scope
    shared = [key for key in draws if key in seeds]  # the draw's own scope first, then out
    if not shared:  # a seed in a function nothing here calls, while module code draws: no
        module = id(context.facts.index.module_scope)
        return not (module in draws and module not in seeds)
    innermost = shared[0]
    return min(seeds[innermost]) < min(draws[innermost])


def _lines_by_scope(context: RuleContext, site, depth: int = 0) -> dict[int, list[int]]:
    """id(scope) -> the lines in it that reach `site`: its own, and its callers' calls."""
    found = {id(site.scope): [site.node.lineno]}
    if site.scope.kind == "function" and depth < 4:
        for caller in calls_of(context.facts.index, site.scope):
            for key, lines in _lines_by_scope(context, caller, depth + 1).items():
                found.setdefault(key, []).extend(lines)
    return found


def _drawn(context: RuleContext, scope, expr: ast.expr, depth: int) -> bool:
    imports = context.facts.index.imports
    for node in ast.walk(expr):
        if isinstance(node, ast.Call):
            qualified = imports.qualify(node.func) or ""
            if is_draw(qualified) or qualified in CLOCKS:
                return True
        if isinstance(node, ast.Name) and depth < 3:
            for binding in scope.bindings.get(node.id, []):
                value = binding.value
                if value is not None and _drawn(context, scope, value, depth + 1):
                    return True
    return False


def _seeds_every_rng(called: set[str]) -> bool:
    return any(name.rsplit(".", 1)[-1] in EVERY_RNG for name in called)


def _generator(context: RuleContext) -> str:
    return f"{context.torch_name()}.Generator().manual_seed(0)"
