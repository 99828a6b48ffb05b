"""Patches the recorder installs before the user's script runs, and what they observe.

Functional dropout / batch_norm are wrapped at `torch.nn.functional` (modules call them from
there), `DataLoader.__iter__` is wrapped to learn each loader's facts and to notice random
draws made while a batch is fetched (augmentation), and HF Accelerate's constructor is made
to split batches on the CPU (its `split_batches=` argument is dead; only
`DataLoaderConfiguration` works, and multi-process CPU needs `cpu=True`).
"""

from __future__ import annotations

import functools
import random
from collections.abc import Mapping

import torch
from torch.utils.data import DataLoader, RandomSampler

DROPOUT_FUNCTIONS = (
    "dropout",
    "dropout1d",
    "dropout2d",
    "dropout3d",
    "alpha_dropout",
    "feature_alpha_dropout",
)
RNG_CHECKS_PER_LOADER = 3  # batches per iteration checked for random draws (cost bound)
RNG_CHECKED_STEPS = 20  # training steps checked for random draws outside data loading


class Observations:
    def __init__(self) -> None:
        self.dropout_calls = 0
        self.batchnorm_training_calls = 0
        self.loaders: dict[int, dict] = {}
        self.current_loader: dict | None = None
        self.seeded_loaders = 0  # unseeded shuffling loaders given a generator (seed_shuffle)
        self.autocast_dtypes: set[str] = set()  # autocast contexts entered with enabled=True
        self.retained_graphs = 0  # backward(retain_graph=True): another backward will follow
        self.random_steps = 0  # steps that drew from torch's global RNG after their batch came
        self.checked_steps = 0
        self.rng_after_fetch = None
        self.beat = _nothing  # liveness.Heartbeat.beat in a recorded run

    def note_backward(self) -> None:
        self.beat()
        if self.current_loader is not None:
            self.current_loader["training"] = True

    def note_fetch(self) -> None:
        self.beat()
        if self.checked_steps < RNG_CHECKED_STEPS:
            self.rng_after_fetch = torch.random.get_rng_state()

    def note_step(self) -> None:
        self.beat()
        if self.rng_after_fetch is not None:
            self.checked_steps += 1
            if not torch.equal(self.rng_after_fetch, torch.random.get_rng_state()):
                self.random_steps += 1
        self.rng_after_fetch = None

    def as_dict(self) -> dict:
        return {
            "dropout_calls": self.dropout_calls,
            "batchnorm_training_calls": self.batchnorm_training_calls,
            "random_steps": self.random_steps,
            "retained_graphs": self.retained_graphs,
            "autocast": sorted(self.autocast_dtypes),
            "loaders": list(self.loaders.values()),
        }


def _nothing() -> None:
    pass


def argument(args, kwargs, index: int, name: str, default):
    if len(args) > index:
        return args[index]
    return kwargs.get(name, default)


def watch_functional(functional, observed: Observations, *, no_dropout: bool) -> None:
    for name in DROPOUT_FUNCTIONS:
        original = getattr(functional, name, None)
        if original is not None:
            setattr(functional, name, _watched_dropout(original, observed, no_dropout))
    attention = getattr(functional, "scaled_dot_product_attention", None)
    if attention is not None:
        functional.scaled_dot_product_attention = _watched_attention(
            attention, observed, no_dropout
        )
    batch_norm = functional.batch_norm

    @functools.wraps(batch_norm)
    def watched_batch_norm(*args, **kwargs):
        if argument(args, kwargs, 5, "training", False):
            observed.batchnorm_training_calls += 1
        return batch_norm(*args, **kwargs)

    functional.batch_norm = watched_batch_norm


def _watched_dropout(original, observed: Observations, no_dropout: bool):
    @functools.wraps(original)
    def watched(input, *args, **kwargs):
        p = argument(args, kwargs, 0, "p", 0.5)
        training = argument(args, kwargs, 1, "training", True)
        if training and p > 0:
            observed.dropout_calls += 1
            if no_dropout:
                return input
        return original(input, *args, **kwargs)

    return watched


def _watched_attention(original, observed: Observations, no_dropout: bool):
    @functools.wraps(original)
    def watched(*args, **kwargs):
        if argument(args, kwargs, 4, "dropout_p", 0.0) > 0:
            observed.dropout_calls += 1
            if no_dropout:
                args, kwargs = args[:4], {**kwargs, "dropout_p": 0.0}
        return original(*args, **kwargs)

    return watched


def watch_autocast(observed: Observations) -> None:
    autocast = torch.amp.autocast_mode.autocast
    original_enter = autocast.__enter__

    @functools.wraps(original_enter)
    def enter(self):
        if getattr(self, "_enabled", False):
            observed.autocast_dtypes.add(str(getattr(self, "fast_dtype", "")).replace("torch.", ""))
        return original_enter(self)

    autocast.__enter__ = enter


def loader_facts(loader: DataLoader) -> dict:
    batch_size = loader.batch_size
    if batch_size is None:
        batch_size = getattr(loader.batch_sampler, "batch_size", None)
    try:
        length = len(loader.dataset)
    except TypeError:
        length = None
    sampler = loader.sampler
    return {
        "index": None,
        "prepared": bool(getattr(loader, "_is_accelerate_prepared", False)),
        "batch_size": getattr(loader, "original_batch_size", None) or batch_size,
        "dataset_length": length,
        "drop_last": bool(getattr(loader.batch_sampler, "drop_last", loader.drop_last)),
        "num_workers": loader.num_workers,
        "shuffle": isinstance(sampler, RandomSampler),
        "seeded": isinstance(sampler, RandomSampler)
        and (sampler.generator is not None or loader.generator is not None),
        "training": False,
        "random_draws_in_fetch": False,
        "samples": 0,  # drawn by this process, over every iteration of the loader
    }


def _rng_state():
    state = [torch.random.get_rng_state(), random.getstate()]
    numpy = __import__("sys").modules.get("numpy")
    if numpy is not None:
        state.append(numpy.random.get_state()[1].tobytes())
    return state


def _same_rng(before, after) -> bool:
    return torch.equal(before[0], after[0]) and before[1:] == after[1:]


class WatchedIterator:
    """The loader's own iterator, checked for random draws on a few of its batches."""

    def __init__(self, iterator, facts: dict, observed: Observations) -> None:
        self._iterator = iterator
        self._facts = facts
        self._observed = observed
        self._fetched = 0

    def __iter__(self):
        return self

    def __len__(self):
        return len(self._iterator)

    def __getattr__(self, name):
        return getattr(self._iterator, name)

    def __next__(self):
        # the first fetch may draw a sampler seed; later ones only draw for augmentation
        check = 0 < self._fetched <= RNG_CHECKS_PER_LOADER and self._facts["num_workers"] == 0
        before = _rng_state() if check else None
        batch = next(self._iterator)
        self._fetched += 1
        self._facts["samples"] += samples_in(batch)
        if check and not _same_rng(before, _rng_state()):
            self._facts["random_draws_in_fetch"] = True
        self._observed.note_fetch()
        return batch


def samples_in(batch) -> int:
    """How many samples a batch holds: the length of its first tensor (or array) along the
    first dimension, looked for in tuples, lists and mappings; 1 when none is found."""
    for _ in range(8):  # nesting depth looked into
        shape = getattr(batch, "shape", None)
        if shape is not None and len(shape) > 0:
            return int(shape[0])
        if isinstance(batch, Mapping):
            batch = next(iter(batch.values()), None)
        elif isinstance(batch, (list, tuple)) and batch:
            first = batch[0]
            if isinstance(first, (int, float, str)):
                return len(batch)
            batch = first
        else:
            break
    return 1


def watch_loaders(observed: Observations, *, seed_shuffle: bool, seed: int) -> None:
    """Every loader's facts and the samples each iteration draws. A DataLoader subclass with
    its own `__iter__` (a prepared loader that shards or places batches) is watched at its
    own iteration, what the script receives, not at the base class's beneath it."""
    original_init = DataLoader.__init__
    original_iter = DataLoader.__iter__

    @functools.wraps(original_init)
    def watched_init(self, *args, **kwargs):
        shuffle = argument(args, kwargs, 2, "shuffle", None)
        if (
            seed_shuffle
            and shuffle
            and kwargs.get("generator") is None
            and kwargs.get("sampler") is None
            and kwargs.get("batch_sampler") is None
            and len(args) < 4
        ):
            # the n-th such loader gets seed + n in both runs
            kwargs["generator"] = torch.Generator().manual_seed(seed + observed.seeded_loaders)
            observed.seeded_loaders += 1
        original_init(self, *args, **kwargs)
        _watch_subclass(type(self))

    def facts_of(loader) -> dict:
        facts = observed.loaders.get(id(loader))
        if facts is None:
            facts = loader_facts(loader)
            facts["index"] = len(observed.loaders)
            observed.loaders[id(loader)] = facts
        observed.current_loader = facts
        return facts

    @functools.wraps(original_iter)
    def watched_iter(self):
        if getattr(self, "_verify_watched_above", False):
            return original_iter(self)  # the subclass's own iteration counts
        return WatchedIterator(original_iter(self), facts_of(self), observed)

    def _watch_subclass(cls) -> None:
        owner = next((c for c in cls.__mro__ if "__iter__" in vars(c)), DataLoader)
        if owner is DataLoader or getattr(owner.__iter__, "_verify_wrapped", False):
            return
        own_iter = owner.__iter__

        @functools.wraps(own_iter)
        def watched_own_iter(self):
            self._verify_watched_above = True
            return WatchedIterator(iter(own_iter(self)), facts_of(self), observed)

        watched_own_iter._verify_wrapped = True
        owner.__iter__ = watched_own_iter

    DataLoader.__init__ = watched_init
    DataLoader.__iter__ = watched_iter


def force_accelerate_split_batches(*, cpu: bool) -> None:
    """HF Accelerate: every Accelerator splits batches (and runs on the CPU when asked)."""
    import accelerate
    from accelerate.utils import DataLoaderConfiguration

    original_init = accelerate.Accelerator.__init__

    @functools.wraps(original_init)
    def init(self, *args, **kwargs):
        config = kwargs.get("dataloader_config") or DataLoaderConfiguration()
        config.split_batches = True
        kwargs["dataloader_config"] = config
        kwargs.pop("split_batches", None)
        if cpu:
            kwargs["cpu"] = True
        original_init(self, *args, **kwargs)

    accelerate.Accelerator.__init__ = init
