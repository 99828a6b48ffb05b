"""MIG009 shared split: a data set split at random from an RNG nothing seeded
(`random_split(data, [n_train, n_val])`, scikit-learn's `train_test_split(x, y)`), where every
process runs it, draws a different split on each process: rank 0's validation samples are
rank 1's training samples, and the prepared loaders shard sets that do not add up to the
original's (SPEC §3b.6: randomness that must agree is made to agree). The split gets a fixed
seed, the same on every process - `generator=torch.Generator().manual_seed(0)`,
`random_state=0` - with a note: the original drew a new split each run.

A file that seeds the RNG the split draws from (`torch.manual_seed`, `np.random.seed`,
`set_seed`, `seed_everything`, anywhere in the program) is taken as drawing alike on every
process, and a split given its own generator or `random_state` is left as it is."""

from __future__ import annotations

from migrator.arglists import call_items
from migrator.findings import Finding
from migrator.rules.base import Rule, RuleContext
from migrator.rules.main_process_writes import every_process_scopes

TORCH_SPLITS = {"torch.utils.data.random_split", "torch.utils.data.dataset.random_split"}
SKLEARN_SPLITS = {"sklearn.model_selection.train_test_split"}
TORCH_SEEDS = {"torch.manual_seed", "torch.random.manual_seed", "torch.cuda.manual_seed_all"}
NUMPY_SEEDS = {"numpy.random.seed"}
EVERY_RNG = {"set_seed", "seed_everything"}  # HF's, Lightning's and most scripts' own


class SharedSplit(Rule):
    code = "MIG009"
    name = "shared-split"
    summary = "a random split every process draws gets one seed, the same on every process"
    triggers = ("random_split", "train_test_split")

    def apply(self, context: RuleContext) -> None:
        if not any(context.prepared(name) for name in context.facts.loaders):
            return  # nothing is sharded: each process's split is its own business
        imports = context.facts.index.imports
        called = {imports.qualify(site.node.func) or "" for site in context.facts.index.calls()}
        seeded_torch = bool(called & TORCH_SEEDS) or _seeds_every_rng(called)
        seeded_numpy = bool(called & NUMPY_SEEDS) or _seeds_every_rng(called)
        for scope in every_process_scopes(context):
            for site in scope.calls:
                qualified = imports.qualify(site.node.func) or ""
                if qualified in TORCH_SPLITS and not seeded_torch:
                    self._seed(context, site, "generator", _generator(context), "torch")
                elif qualified in SKLEARN_SPLITS and not seeded_numpy:
                    self._seed(context, site, "random_state", "0", "NumPy")

    def _seed(self, context: RuleContext, site, keyword: str, value: str, rng: str) -> None:
        call = site.node
        if any(k.arg in (keyword, None) for k in call.keywords):
            return  # its own generator, or keywords passed through `**`
        if not context.processes.runs_on_every_process(site.statement):
            return

        def rewrite(_text: str, renderer, call=call) -> str:
            return call_items(renderer, call).appended(f"{keyword}={value}").render()

        context.edits.rewrite(call, rewrite)
        context.findings.append(Finding(code="MIG009", level="note", node=call, message=(
            f"this split draws from the {rng} RNG, which nothing seeds: on N processes each would "
            f"draw its own split (one process's validation samples another's training "
            f"samples); it is drawn with `{keyword}={value}` on every process - the original drew "
            "a new split each run")))  # fmt: skip


def _seeds_every_rng(called: set[str]) -> bool:
    return any(name.rsplit(".", 1)[-1] in EVERY_RNG for name in called)


def _generator(context: RuleContext) -> str:
    return f"{context.torch_name()}.Generator().manual_seed(0)"
