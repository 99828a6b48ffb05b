"""Analysis: the roles of names in a training script (see roles.py), from one syntactic pass."""

from migrator.analysis.roles import TrainingFacts, analyse

__all__ = ["TrainingFacts", "analyse"]
