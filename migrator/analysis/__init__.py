"""Analysis: what a training program is, read once from one syntactic pass.

By concept, in the order a reader meets them:

- `syntax/`     the index of one module (scopes, blocks, statements, bindings, uses, calls,
                loops), the import-alias table, small `ast` views;
- `catalogue/`  what APIs mean, declared in one place: the torch vocabulary (`patterns`) and
                the side effects that change the world (`effects`);
- `model/`      the program model: where the object a name holds is made (`origins`), the call
                graph (`calls`), objects held on others (`chains`, `instances`), what a loop
                draws its batches from (`loop_sources`), where loader data flows (`dataflow`);
- `roles/`      the training objects and loops (`analyser` builds `TrainingFacts`);
- `placement/`  where `accelerator.prepare(...)` goes;
- `distributed/` the native torch.distributed code MIG010 takes apart;
- `effects/`    which code runs on every process (`processes`) and what each value counts on
                a process (`values`): the facts SPEC §3b's obligations are about.

`analyse` and `TrainingFacts` are imported on first use, so that a light submodule does not
import the whole analysis."""

__all__ = ["TrainingFacts", "analyse"]


def __getattr__(name: str):
    if name == "analyse":
        from migrator.analysis.roles.analyser import analyse

        return analyse
    if name == "TrainingFacts":
        from migrator.analysis.roles.facts import TrainingFacts

        return TrainingFacts
    raise AttributeError(f"module 'migrator.analysis' has no attribute {name!r}")
