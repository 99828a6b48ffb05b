"""Analysis: the roles of names in a training script (see roles.py), from one syntactic pass."""

from migrator.analysis.facts import TrainingFacts
from migrator.analysis.roles import analyse

__all__ = ["TrainingFacts", "analyse"]
