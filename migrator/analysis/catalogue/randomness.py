"""Random number generators and their seeds: the calls that seed an RNG (torch's, NumPy's,
Python's, and the `set_seed` helpers that seed them all), and the calls that draw from one.
Shared by MIG009 (what must agree or differ across processes) and the value flow (a draw from
an RNG that no process-independent seed makes alike is this process's own)."""

from __future__ import annotations

import ast
from dataclasses import dataclass

TORCH_SEEDS = {"torch.manual_seed", "torch.random.manual_seed", "torch.cuda.manual_seed_all"}
NUMPY_SEEDS = {"numpy.random.seed"}
PYTHON_SEEDS = {"random.seed"}
OTHER_SEEDS = NUMPY_SEEDS | PYTHON_SEEDS
EVERY_RNG = {"set_seed", "seed_everything"}  # HF's, Lightning's and most scripts' own
# words of a seed that differs per process (`seed + rank`, `seed + accelerator.process_index`)
PER_PROCESS = ("rank", "process_index", "local_rank", "gpu")
TORCH_DRAWS = {
    "torch.randn", "torch.rand", "torch.randint", "torch.randn_like", "torch.rand_like",
    "torch.randint_like", "torch.randperm", "torch.normal", "torch.bernoulli",
    "torch.multinomial", "torch.poisson",
}  # fmt: skip
# NumPy's and Python's module-level draws (their global RNGs), besides the seeds
NUMPY_DRAWS = "numpy.random."
PYTHON_DRAWS = "random."
NOT_DRAWS = {"numpy.random.RandomState", "numpy.random.default_rng", "numpy.random.Generator",
             "random.Random", "numpy.random.get_state", "random.getstate"}  # fmt: skip


def is_draw(qualified: str) -> bool:
    """`torch.randn`, `np.random.choice`, `random.shuffle`: a draw from a global RNG."""
    if qualified in TORCH_DRAWS:
        return True
    if qualified in NOT_DRAWS or qualified in NUMPY_SEEDS | PYTHON_SEEDS:
        return False
    return qualified.startswith((NUMPY_DRAWS, PYTHON_DRAWS))


# data splits that draw from a global RNG unless given their own seed: the keyword that does
SPLITS = {"torch.utils.data.random_split": "generator",
          "torch.utils.data.dataset.random_split": "generator",
          "sklearn.model_selection.train_test_split": "random_state"}  # fmt: skip


def unseeded_split(call, qualified: str) -> str | None:
    """The RNG an unseeded split draws from (`random_split(ds, [n, m])`: "torch";
    `train_test_split(x, y)`: "numpy"), or None."""
    seed = SPLITS.get(qualified)
    if seed is None or any(k.arg == seed for k in call.keywords):
        return None
    return "torch" if seed == "generator" else "numpy"


def is_seed(qualified: str) -> bool:
    return qualified in TORCH_SEEDS | OTHER_SEEDS or qualified.rsplit(".", 1)[-1] in EVERY_RNG


ALL_RNGS = "every RNG"


def rng_of(qualified: str) -> str:
    """Which global RNG a seed or a draw is about: "torch", "numpy", "random", or
    `ALL_RNGS` for the helpers that seed them all."""
    if qualified.rsplit(".", 1)[-1] in EVERY_RNG:
        return ALL_RNGS
    if qualified.startswith("sklearn."):
        return "numpy"  # an unseeded scikit-learn split draws from NumPy's global RNG
    return qualified.split(".", 1)[0]


EVERY_METHOD = "*"  # a class whose constructor draws: what it keeps differs per process


@dataclass(frozen=True)
class Draws:
    """What a project helper draws (migrator/program/helper_draws.py)."""

    draw: str  # the first draw found, qualified (`numpy.random.permutation`)
    methods: frozenset | None = None  # a class's drawing methods; None: a function


# Layers that draw while training: dropout named as such, torch's layers with dropout on by
# default (`nn.Transformer*`: 0.1) or when asked (`nn.LSTM(..., dropout=0.2)`), library models
# built with dropout (transformers' models; torchvision's classifiers with a dropout head),
# and torchvision's random transforms.
DROPOUT = (
    "torch.nn.Dropout", "torch.nn.functional.dropout", "torch.nn.AlphaDropout",
    "torch.nn.FeatureAlphaDropout", "torch.nn.functional.alpha_dropout",
)  # fmt: skip
DROPOUT_BY_DEFAULT = (
    "torch.nn.Transformer", "torch.nn.TransformerEncoderLayer", "torch.nn.TransformerDecoderLayer",
)  # fmt: skip
DROPOUT_WHEN_ASKED = (
    "torch.nn.LSTM", "torch.nn.GRU", "torch.nn.RNN", "torch.nn.MultiheadAttention",
    "timm.create_model",
)  # fmt: skip
TORCHVISION_DROPOUT = (
    "alexnet", "vgg", "googlenet", "inception_v3", "mobilenet", "efficientnet", "squeezenet",
    "mnasnet",
)  # fmt: skip
TRANSFORMERS_NOT_MODELS = ("Tokenizer", "Config", "Processor", "FeatureExtractor", "pipeline")
RANDOM_TRANSFORMS = (
    "Random", "ColorJitter", "RandAugment", "AutoAugment", "TrivialAugment", "AugMix",
    "GaussianBlur", "ElasticTransform",
)  # fmt: skip


def random_layer(call: ast.Call, qualified: str) -> bool:
    """Does this call make (or apply) a layer that draws at random while the model trains?"""
    if qualified.startswith(DROPOUT):
        return True
    rate = next((k.value for k in call.keywords if k.arg in ("dropout", "drop_rate", "p")), None)
    off = isinstance(rate, ast.Constant) and not rate.value
    if qualified.startswith(DROPOUT_BY_DEFAULT):
        return not off
    if qualified in DROPOUT_WHEN_ASKED:
        return rate is not None and not off
    parts = qualified.split(".")
    if qualified.startswith("torchvision.models.") and not qualified.startswith(
        "torchvision.models.detection"
    ):
        return parts[-1].startswith(TORCHVISION_DROPOUT)
    if parts[0] == "transformers" and len(parts) >= 2:
        name = parts[1]
        return ("Model" in name or "For" in name) and not any(
            word in name for word in TRANSFORMERS_NOT_MODELS
        )
    if qualified.startswith("torchvision.transforms"):
        return parts[-1].startswith(RANDOM_TRANSFORMS)
    return False
