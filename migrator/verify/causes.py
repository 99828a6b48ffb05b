"""Why two runs are not comparable, or why they diverged, from what the recorder observed.

Each cause names what in the script makes an N-process run differ from the 1-process original
and the documented way to compare anyway (README.md, "When runs differ").
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction

from migrator.verify.compare import Comparison

SCALE_RTOL = 1e-4  # step 1's loss ratio is a pure scale: both runs hold the same weights
HOLD_RTOL = 1e-3  # later steps: the ratio stays while a scale-invariant optimizer trains on
NEAR_RTOL = 0.05  # a sum the source shows, under other per-process differences (VAE noise)


@dataclass
class Cause:
    code: str  # dropout | batchnorm | partial-batch | scheduler | augmentation | workers | ...
    message: str
    remedy: str
    first_step: int | None = None  # the step it first affects, when known

    def as_dict(self) -> dict:
        return {
            "code": self.code,
            "message": self.message,
            "remedy": self.remedy,
            "first_step": self.first_step,
        }


def training_loaders(observed: dict) -> list[dict]:
    return [loader for loader in observed.get("loaders", []) if loader.get("training")]


def batch_size_problems(observed: dict, nproc: int, *, training_only: bool) -> list[str]:
    """Loaders whose batch size does not divide by N: split batches cannot reproduce them."""
    loaders = training_loaders(observed) if training_only else observed.get("loaders", [])
    return [
        f"loader {loader['index']} has batch size {loader['batch_size']}, which does not divide "
        f"by {nproc} processes (split_batches=True needs equal slices of each original batch)"
        for loader in loaders
        if loader.get("batch_size") and loader["batch_size"] % nproc
    ]


def find_causes(
    original: dict,
    comparison: Comparison | None,
    *,
    nproc: int,
    no_dropout: bool,
    runtime: str,
    summed_at: tuple[str, ...] = (),
) -> list[Cause]:
    """Every cause that applies: a loss scale seen in the losses first (it is exact), then
    the one matching the divergence step.

    `summed_at`: where the original's source sums its loss over the batch (source.py)."""
    causes: list[Cause] = []
    if original.get("dropout_calls") and not no_dropout:
        causes.append(
            Cause(
                "dropout",
                "dropout is active in training: each process draws its own masks for its slice of "
                "the batch, from a random stream the Accelerator's setup may also have advanced",
                "compare with --no-dropout (turns dropout off in both runs)",
                1,
            )
        )
    if original.get("random_steps") and not original.get("dropout_calls") and nproc > 1:
        causes.append(
            Cause(
                "random-draws",
                "the training step draws random numbers (e.g. torch.randn noise) after its batch is "
                "loaded: each process draws its own for its slice of the batch",
                "draw them from a torch.Generator seeded the same on every process, or compare "
                "with --nproc 1",
                1,
            )
        )
    if original.get("autocast"):
        causes.append(
            Cause(
                "mixed-precision",
                f"the script trains under autocast ({', '.join(original['autocast'])}): "
                "low-precision kernels round differently on a slice of the batch, so results are "
                "close but not equal to fp32 tolerances",
                "compare with looser tolerances, e.g. --rtol 1e-2 --atol 1e-3",
                None,
            )
        )
    if original.get("retained_graphs") and nproc > 1:
        causes.append(
            Cause(
                "repeated-backward",
                "the script calls backward more than once on one forward pass "
                "(retain_graph=True): DistributedDataParallel averages gradients across processes "
                "only once per forward, so the later backward's gradients stay per-process",
                "add the losses and call backward once: accelerator.backward(loss_a + loss_b)",
                1,
            )
        )
    if original.get("batchnorm_training_calls") and nproc > 1:
        causes.append(
            Cause(
                "batchnorm",
                f"BatchNorm in training mode: each of the {nproc} processes normalises with the "
                "statistics of its own slice of the batch, and running statistics come from rank 0",
                "compare with --nproc 1, or convert the model with "
                "torch.nn.SyncBatchNorm.convert_sync_batchnorm (GPU) before prepare",
                1,
            )
        )
    for loader in training_loaders(original):
        causes.extend(_loader_causes(loader, nproc, runtime))
    if comparison is not None and comparison.first_lr_divergence is not None:
        step = comparison.first_lr_divergence
        row = comparison.rows[step - 1]
        # a changed rate shows in the loss after it; with every loss equal, in the weights
        affected = step + 1 if comparison.first_loss_divergence is not None else step
        causes.append(
            Cause(
                "scheduler",
                f"the learning rate differs from step {step} (original {row.lr_original:.6g}, "
                f"migrated {row.lr_migrated:.6g}): a prepared scheduler steps differently from the "
                "original, typically one meant to step once per epoch",
                "do not pass a per-epoch scheduler to accelerator.prepare (migrate leaves it "
                "unprepared), or use Accelerator(step_scheduler_with_optimizer=False)",
                affected,
            )
        )
    if comparison is not None and comparison.step_count_problem:
        causes.append(
            Cause(
                "steps",
                comparison.step_count_problem + " (gradient accumulation whose window does "
                "not divide the epoch, or an uneven last batch, changes when the optimizer steps)",
                "compare with --max-steps below the first epoch's end",
                comparison.divergence_step,
            )
        )
    step = comparison.divergence_step if comparison is not None else None
    causes.sort(key=lambda cause: (cause.first_step != step, cause.first_step or math.inf))
    scale = loss_scale_cause(comparison, nproc, summed_at) if comparison is not None else None
    ratios = loss_ratios(comparison) if comparison is not None else []
    if (
        scale is None
        and summed_at
        and nproc > 1
        and step == 1
        and ratios
        and abs(ratios[0] * nproc - 1) <= NEAR_RTOL
    ):
        # the source shows it; another difference keeps the losses from showing it exactly
        scale = summed_loss_cause(nproc, summed_at)
        scale.message += (
            f"; here the migrated loss is {ratios[0]:.6g} x the original at step 1, not "
            f"exactly 1/{nproc}: another difference (see the other causes) changes it too"
        )
    return ([scale] if scale else []) + causes


def loss_ratios(comparison: Comparison) -> list[float]:
    """migrated / original per step, while both runs have a nonzero finite loss."""
    ratios = []
    for row in comparison.rows:
        if row.original is None or row.migrated is None or row.original == 0:
            break
        ratio = row.migrated / row.original
        if not math.isfinite(ratio):
            break
        ratios.append(ratio)
    return ratios


def loss_scale_cause(comparison: Comparison, nproc: int, summed_at=()) -> Cause | None:
    """The migrated loss is a constant multiple of the original's.

    At step 1 both runs hold the same weights and see the same global batch, so the ratio of
    the losses there is exactly the factor between them. A ratio of 1/N is the mark of a loss
    summed over the batch: under split batches each process sums only its B/N samples."""
    if comparison.first_loss_divergence != 1:
        return None
    ratios = loss_ratios(comparison)
    if not ratios or ratios[0] <= 0:
        return None
    scale = ratios[0]
    held = next((i for i, r in enumerate(ratios) if abs(r / scale - 1) > HOLD_RTOL), len(ratios))
    steps = len(comparison.rows)
    if held == steps and steps > 1:
        where = f"at every one of the {steps} steps"
    elif held > 1:
        where = f"at steps 1 to {held} of {steps}"
    else:
        where = "at step 1, where both runs hold the same weights and see the same batch"
    if nproc > 1 and abs(scale * nproc - 1) <= SCALE_RTOL:
        seen = f"the migrated loss is {scale:.6g} x the original {where}"
        if held < steps:
            seen += (
                f"; then training drifts apart, each migrated step taking 1/{nproc} of the gradient"
            )
        return summed_loss_cause(nproc, summed_at, seen)
    fraction = Fraction(scale).limit_denominator(8)
    if fraction not in (0, 1) and (abs(scale / fraction - 1) <= SCALE_RTOL or held >= 3):
        factor = f"{fraction}" if abs(scale / fraction - 1) <= SCALE_RTOL else f"{scale:.4g}"
        return Cause(
            "loss-scale",
            f"the migrated loss is {factor} x the original {where}: the migrated script "
            "changed the loss's scale (a factor on the loss, or a different divisor for "
            "gradient accumulation)",
            "compare the loss lines of `migrate --diff`; accelerator.backward already divides "
            "by gradient_accumulation_steps, so a manual `loss / k` must go",
            1,
        )
    return None


def summed_loss_cause(nproc: int, summed_at=(), seen: str | None = None) -> Cause:
    """A loss summed over the batch, shown by the source (`summed_at`), the losses (`seen`:
    how the recorded ratio shows it), or both."""
    if summed_at:
        shown = "; ".join(summed_at[:3]) + (" ..." if len(summed_at) > 3 else "")
        what = f"the loss is summed over the batch, not averaged ({shown})"
    else:
        what = (
            "the loss is most likely summed over the batch, not averaged (in code this file "
            "does not show, e.g. an imported loss function), or the migration scaled it by "
            f"1/{nproc}"
        )
    evidence = f": {seen}" if seen else ""
    return Cause(
        "summed-loss",
        f"{what}. Under verify's split batches each of the {nproc} processes sums only its "
        f"1/{nproc} slice of the batch and DistributedDataParallel averages the {nproc} "
        f"gradients, so the migrated loss and gradient are 1/{nproc} of the original's"
        f"{evidence}",
        f"compare with --nproc 1, or with a mean reduction (reduction='mean', or the sum "
        f"divided by the batch size). This is an effect of the comparison only: in the real "
        f"run (split_batches=False) each process sums the loss over its own full batch, the "
        f"original's scale, and DDP averages the {nproc} sums, so every step's gradient is "
        f"the mean of {nproc} batch sums (the original's scale, over {nproc}x the samples "
        "per step); the learning rate needs no change for the sum",
        1,
    )


def _loader_causes(loader: dict, nproc: int, runtime: str) -> list[Cause]:
    causes = []
    size, length = loader.get("batch_size"), loader.get("dataset_length")
    if nproc > 1 and size and length and length % size and not loader.get("drop_last"):
        full = length // size
        causes.append(
            Cause(
                "partial-batch",
                f"the training loader's last batch is partial ({length} samples in batches of "
                f"{size} leave {length % size}); the {nproc}-process run completes it with samples "
                "from the start of the epoch (even_batches) so every process gets an equal slice",
                f"compare with --max-steps {full}" if full else "use drop_last=True",
                full + 1,
            )
        )
    if loader.get("random_draws_in_fetch"):
        causes.append(
            Cause(
                "augmentation",
                "the dataset draws random numbers while a batch is loaded (random augmentation): "
                "each process loads only its slice, so the draws land on different samples",
                "make the augmentation a function of the sample index (a generator seeded by it), "
                "or turn it off for the comparison",
                1,
            )
        )
    if loader.get("num_workers"):
        causes.append(
            Cause(
                "workers",
                f"the training loader uses num_workers={loader['num_workers']}: each process seeds "
                "its workers from its own draw, so randomness inside workers differs",
                "compare with num_workers=0",
                1,
            )
        )
    if loader.get("shuffle") and not loader.get("seeded") and runtime != "runtime":
        causes.append(
            Cause(
                "shuffle",
                "the training loader shuffles without a generator: the launched run draws its "
                "order from a different point of the random stream",
                "pass DataLoader(generator=torch.Generator().manual_seed(...))",
                1,
            )
        )
    return causes


def notes_when_equal(original: dict, *, nproc: int, no_dropout: bool) -> list[str]:
    """What the user should know although the runs agree (they may not with more processes)."""
    notes = []
    if original.get("dropout_calls") and not no_dropout:
        notes.append(
            "dropout is active: the runs agree with this process count, but per-process "
            "masks can make runs with more processes differ (--no-dropout compares "
            "without it)"
        )
    if original.get("random_steps") and not original.get("dropout_calls") and nproc == 1:
        notes.append(
            "the training step draws random numbers: with more than one process each "
            "draws its own, so runs differ"
        )
    if original.get("batchnorm_training_calls") and nproc == 1:
        notes.append(
            "BatchNorm in training mode: with more than one process each normalises its "
            "own slice of the batch, so runs differ"
        )
    return notes
