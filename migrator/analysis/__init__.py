"""Analysis: the roles of names in a training script (see roles.py), from one syntactic pass.

`analyse` and `TrainingFacts` are imported on first use, so that a light submodule
(`program_imports`, which a run of one file without training code reaches) does not import
the whole analysis."""

__all__ = ["TrainingFacts", "analyse"]


def __getattr__(name: str):
    if name == "analyse":
        from migrator.analysis.roles.analyser import analyse

        return analyse
    if name == "TrainingFacts":
        from migrator.analysis.roles.facts import TrainingFacts

        return TrainingFacts
    raise AttributeError(f"module 'migrator.analysis' has no attribute {name!r}")
