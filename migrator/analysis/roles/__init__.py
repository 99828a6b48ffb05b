"""The roles of a training program: its loops, models, optimizers, loaders, schedulers and
the scope that owns them (`analyser.py` builds `facts.TrainingFacts`, one mixin per concept)."""
