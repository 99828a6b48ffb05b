"""The rule registry: every rule class, in code order, and the order they are applied in.

Rules that remove or rewrite expressions run first (MIG010 after MIG003/MIG004, which strip the
`.to(rank)` it would otherwise rewrite); MIG002 then sees which device uses are left; MIG001
runs last, once it knows every scope that needs `accelerator`.
"""

from __future__ import annotations

from migrator.rules.base import Rule, RuleContext
from migrator.rules.mig001_accelerator import CreateAccelerator
from migrator.rules.mig002_device import Device
from migrator.rules.mig003_model_placement import ModelPlacement
from migrator.rules.mig004_batch_placement import BatchPlacement
from migrator.rules.mig005_backward import Backward
from migrator.rules.mig006_prepare import Prepare
from migrator.rules.mig007_model_attributes import ModelAttributes
from migrator.rules.mig008_unused_parameters import UnusedParameters
from migrator.rules.mig009_shared_split import SharedSplit
from migrator.rules.mig010_native_ddp import NativeDDP
from migrator.rules.mig020_mixed_precision import MixedPrecision
from migrator.rules.mig021_clipping import Clipping
from migrator.rules.mig022_accumulation import Accumulation
from migrator.rules.mig030_main_process_io import MainProcessIO
from migrator.rules.mig031_eval_metrics import EvalMetrics
from migrator.rules.mig901_data_parallel import DataParallel
from migrator.rules.mig902_device_index import DeviceIndex
from migrator.rules.mig910_hidden_step import HiddenStep
from migrator.rules.reduced_outputs import ReducedOutputs

ALL_RULES: tuple[type[Rule], ...] = (
    CreateAccelerator,
    Device,
    ModelPlacement,
    BatchPlacement,
    Backward,
    Prepare,
    ModelAttributes,
    UnusedParameters,
    SharedSplit,
    NativeDDP,
    MixedPrecision,
    Clipping,
    Accumulation,
    MainProcessIO,
    EvalMetrics,
    ReducedOutputs,
    DataParallel,
    DeviceIndex,
    HiddenStep,
)
APPLY_ORDER: tuple[type[Rule], ...] = (
    DataParallel,
    DeviceIndex,
    HiddenStep,
    ModelPlacement,
    BatchPlacement,
    NativeDDP,
    MixedPrecision,
    Accumulation,
    Backward,
    Clipping,
    MainProcessIO,
    EvalMetrics,
    ModelAttributes,
    Prepare,
    UnusedParameters,
    SharedSplit,
    Device,
    CreateAccelerator,
    ReducedOutputs,
)
# MIG001 is applied whenever another selected rule needs an `accelerator` and none exists:
# output that names an undefined accelerator would not run.
IMPLIED = {"MIG001"}

__all__ = ["ALL_RULES", "APPLY_ORDER", "IMPLIED", "Rule", "RuleContext"]
