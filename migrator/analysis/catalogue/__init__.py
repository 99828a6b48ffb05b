"""What APIs mean, declared once: the torch vocabulary (`patterns.py`: optimizers, loaders,
schedulers, devices, autocast) and the side effects that change the world (`effects.py`)."""
