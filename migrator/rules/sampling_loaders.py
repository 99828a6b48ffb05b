"""Loaders that sample in their own iterator, which `prepare` does not keep (MIG900).

`accelerator.prepare(loader)` rebuilds a DataLoader from the loader's data set, sampler and
collate function: a DataLoader subclass that turns what its collate function returns into
batches in an iterator of its own loses that step. PyG's neighbour samplers
(`NeighborLoader(data, num_neighbors=..., input_nodes=...)`: its collate returns sampled node
ids, its iterator builds the subgraph `Data`) and DGL's `dgl.dataloading.DataLoader` are such
loaders: prepared, the loop would get sampler outputs instead of graphs. Their data is
sharded by handing each process its own input nodes, by hand.
"""

from __future__ import annotations

from migrator.analysis.model.origins import bindings_of, value_call
from migrator.findings import Finding

SAMPLING_LOADERS = frozenset({
    "torch_geometric.loader.NeighborLoader", "torch_geometric.loader.LinkNeighborLoader",
    "torch_geometric.loader.HGTLoader", "torch_geometric.loader.LinkLoader",
    "torch_geometric.loader.NodeLoader", "torch_geometric.loader.ZipLoader",
    "torch_geometric.loader.ShaDowKHopSampler", "torch_geometric.loader.ImbalancedSampler",
    "dgl.dataloading.DataLoader", "dgl.dataloading.NodeDataLoader",
    "dgl.dataloading.EdgeDataLoader",
})  # fmt: skip


def sampling_loader_refusal(context, names: list[str], scope) -> Finding | None:
    """A MIG900 for the first of `names` (objects to prepare, read in `scope`) made by a
    loader that samples in its own iterator; None when none is."""
    facts = context.facts
    imports = facts.index.imports
    for name in names:
        for binding in bindings_of(facts.origin(scope, name)):
            call = value_call(binding)
            qualified = imports.qualify(call.func) if call is not None else None
            if qualified in SAMPLING_LOADERS:
                short = qualified.rsplit(".", 1)[-1]
                return Finding(code="MIG900", node=call, message=(
                    f"`{name}` is a `{short}`, which builds its batches in an iterator of its "
                    "own (sampled subgraphs): accelerator.prepare rebuilds a plain DataLoader "
                    "and would hand the loop the sampler's raw output; shard its input nodes "
                    "per process by hand (`input_nodes` split by `accelerator.process_index`)"
                ))  # fmt: skip
    return None
