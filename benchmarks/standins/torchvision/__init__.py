"""A torchvision stand-in for benchmarks/verify_corpus.py: synthetic datasets of the real
shapes, the common transforms, a no-op save_image. It is put on PYTHONPATH of the verify runs
only, so tutorial scripts run without downloads and without torchvision installed; what it
lacks (models, most random augmentations) fails loudly, and the script is then reported as not
runnable here. Not part of the migrator."""

from torchvision import datasets, transforms, utils  # noqa: F401

__version__ = "0.0-standin"
