"""accelerate-migrator: rewrite PyTorch training scripts to the Accelerate API."""

__version__ = "0.1.0"
