"""The public `Accelerator`: HF Accelerate 1.x names and semantics, delegating to the modules.

Its methods come by concept: `prepare` (preparing.py), the training step (stepping.py),
process control (process_control.py), experiment tracking (experiment.py), saving and
checkpoints (checkpoint.py); this file holds construction, the facts, collectives and models.

Several Accelerators in one process share the process state (`runtime.state`): process
group, device, mixed precision, GradScaler and gradient-accumulation state; each keeps its own
prepared objects, `step`, trackers, hooks and checkpoint configuration (docs/runtime.md).

Environment overrides, read here (for `migrate verify` and for users who cannot edit code):
  MIGRATE_SPLIT_BATCHES=1|0   forces `split_batches`      MIGRATE_EVEN_BATCHES=1|0 forces `even_batches`
  ACCELERATE_MIXED_PRECISION  default for `mixed_precision` when the argument is not given
  ACCELERATE_GRADIENT_ACCUMULATION_STEPS  default when the argument is not given
  ACCELERATE_USE_CPU=1        same as cpu=True
"""

from __future__ import annotations

import gc
import os
import warnings
from collections import OrderedDict
from contextlib import contextmanager
from typing import Any

import torch

from runtime import collectives, config, options, state, wrappers
from runtime.checkpoint import Checkpointing
from runtime.config import DataLoaderConfiguration, GradientAccumulationPlugin
from runtime.experiment import ExperimentTracking
from runtime.preparing import Preparing
from runtime.process_control import ProcessControl
from runtime.stepping import TrainingStep
from runtime.unsupported import UNSUPPORTED_ATTRIBUTES, check_backends

# HF's `accelerate.accelerator` module offers these too (`from ... import DataLoaderConfiguration`)
__all__ = ["Accelerator", "DataLoaderConfiguration", "GradientAccumulationPlugin"]


class Accelerator(Preparing, TrainingStep, ProcessControl, ExperimentTracking, Checkpointing):
    """Prepares a training script's objects for N processes launched by torchrun."""

    def __init__(
        self,
        device_placement: bool = True,
        split_batches: bool = False,
        mixed_precision: str | None = None,
        gradient_accumulation_steps: int | None = None,
        cpu: bool = False,
        dataloader_config: Any = None,
        deepspeed_plugin: Any = None,
        fsdp_plugin: Any = None,
        torch_tp_plugin: Any = None,
        megatron_lm_plugin: Any = None,
        rng_types: list | None = None,
        log_with: Any = None,
        project_dir: str | os.PathLike | None = None,
        project_config: Any = None,
        gradient_accumulation_plugin: Any = None,
        step_scheduler_with_optimizer: bool = True,
        kwargs_handlers: list | None = None,
        dynamo_backend: Any = None,
        dynamo_plugin: Any = None,
        deepspeed_plugins: Any = None,
        parallelism_config: Any = None,
        even_batches: bool = True,
    ) -> None:
        check_backends(
            deepspeed_plugin=deepspeed_plugin or deepspeed_plugins,
            fsdp_plugin=fsdp_plugin,
            torch_tp_plugin=torch_tp_plugin,
            megatron_lm_plugin=megatron_lm_plugin,
            parallelism_config=parallelism_config,
            dynamo_backend=dynamo_backend,
            dynamo_plugin=dynamo_plugin,
            mixed_precision=mixed_precision,
        )
        self.project_configuration = project_config or config.ProjectConfiguration()
        if project_dir is not None and self.project_configuration.project_dir is None:
            self.project_configuration.set_directories(str(project_dir))
        self._dataloader_config = options.loader_configuration(
            dataloader_config, split_batches, even_batches
        )
        handlers = options.kwargs_handlers(kwargs_handlers)
        self.ddp_handler = handlers.get("DistributedDataParallelKwargs")
        self.scaler_handler = handlers.get("GradScalerKwargs")
        self.init_handler = handlers.get("InitProcessGroupKwargs")
        self.autocast_handler = handlers.get("AutocastKwargs")
        self.profile_handler = handlers.get("ProfileKwargs")

        cpu = cpu or bool(state.env_flag("ACCELERATE_USE_CPU", False))
        init_kwargs = self.init_handler.to_kwargs() if self.init_handler else {}
        self.state = state.accelerator_state_for(
            mixed_precision, cpu, init_kwargs, check=wrappers.check_mixed_precision
        )
        if self.state.scaler is None:
            scaler_kwargs = self.scaler_handler.to_kwargs() if self.scaler_handler else {}
            self.state._scaler = wrappers.make_grad_scaler(
                self.mixed_precision, self.device, **scaler_kwargs
            )
        self.gradient_state = state.GradientState()
        plugin = options.accumulation_plugin(
            gradient_accumulation_plugin, gradient_accumulation_steps
        )
        if plugin is not None:
            self.gradient_state.configure(plugin)

        self.device_placement = device_placement
        self.step_scheduler_with_optimizer = step_scheduler_with_optimizer
        self.rng_types = rng_types if rng_types is not None else ["generator"]
        self.step = 0
        self.flag_tensor: torch.Tensor | None = None
        self.trackers: list = []
        self.log_with = options.trackers(log_with, self.logging_dir)
        self._models: list = []
        self._optimizers: list = []
        self._schedulers: list = []
        self._dataloaders: list = []
        self._custom_objects: list = []
        self._save_model_state_pre_hook: OrderedDict = OrderedDict()
        self._load_model_state_pre_hook: OrderedDict = OrderedDict()
        self._warned_backward_outside_accumulate = False

    def __getattr__(self, name: str):
        if name in UNSUPPORTED_ATTRIBUTES:
            raise NotImplementedError(f"Accelerator.{name}: {UNSUPPORTED_ATTRIBUTES[name]}")
        raise AttributeError(f"'Accelerator' object has no attribute {name!r}")

    # ---- facts (process-wide ones come from the shared state) ----------------------------
    device = property(lambda self: self.state.device)
    process_index = property(lambda self: self.state.process_index)
    local_process_index = property(lambda self: self.state.local_process_index)
    num_processes = property(lambda self: self.state.num_processes)
    is_main_process = property(lambda self: self.state.is_main_process)
    is_local_main_process = property(lambda self: self.state.is_local_main_process)
    is_last_process = property(lambda self: self.state.is_last_process)
    use_distributed = property(lambda self: self.state.use_distributed)
    distributed_type = property(lambda self: self.state.distributed_type)
    mixed_precision = property(lambda self: self.state.mixed_precision)
    end_of_dataloader = property(lambda self: self.gradient_state.end_of_dataloader)
    split_batches = property(lambda self: self.dataloader_config.split_batches)
    dispatch_batches = property(lambda self: self.dataloader_config.dispatch_batches)
    use_seedable_sampler = property(lambda self: self.dataloader_config.use_seedable_sampler)
    non_blocking = property(lambda self: self.dataloader_config.non_blocking)
    use_stateful_dataloader = property(lambda self: False)
    project_dir = property(lambda self: self.project_configuration.project_dir)
    logging_dir = property(lambda self: self.project_configuration.logging_dir)
    save_iteration = property(lambda self: self.project_configuration.iteration)
    should_save_model = property(lambda self: self.is_local_main_process)
    # HF answers these with None / False unless DeepSpeed, FSDP, TP or fp8 is configured
    deepspeed_plugin = None
    parallelism_config = None
    torch_device_mesh = None
    fp8_recipe_handler = ao_recipe_handler = te_recipe_handler = msamp_recipe_handler = None
    is_fsdp2 = is_composable_parallelism_enabled = False
    fp8_enabled = has_fp8_handler = delayed_fp8_autocast = has_lomo_optimizer = False

    @property
    def multi_device(self) -> bool:
        return self.use_distributed and self.distributed_type == config.DistributedType.MULTI_GPU

    @property
    def native_amp(self) -> bool:
        """Whether autocast is active: bf16, or fp16 on CUDA (fp16 on CPU is refused)."""
        return self.mixed_precision in wrappers.AUTOCAST_DTYPES

    @property
    def scaler(self):
        return self.state.scaler

    @scaler.setter
    def scaler(self, scaler) -> None:
        self.state._scaler = scaler

    @property
    def dataloader_config(self):
        return self._dataloader_config

    @dataloader_config.setter
    def dataloader_config(self, given) -> None:
        """Read at once (HF's or ours): what runtime lacks fails here, not at `prepare`."""
        self._dataloader_config = options.loader_configuration(given, False, True)

    @property
    def even_batches(self) -> bool:
        return self.dataloader_config.even_batches

    @even_batches.setter
    def even_batches(self, value: bool) -> None:
        self.dataloader_config.even_batches = value

    @property
    def sync_gradients(self) -> bool:
        return self.gradient_state.sync_gradients

    @sync_gradients.setter
    def sync_gradients(self, value: bool) -> None:
        self.gradient_state.sync_gradients = value

    @property
    def gradient_accumulation_steps(self) -> int:
        return self.gradient_state.num_steps

    @gradient_accumulation_steps.setter
    def gradient_accumulation_steps(self, steps: int) -> None:
        self.gradient_state.num_steps = steps

    @property
    def optimizer_step_was_skipped(self) -> bool:
        return any(optimizer.step_was_skipped for optimizer in self._optimizers)

    @property
    def writes_checkpoints(self) -> bool:
        """The main process, or each node's with ProjectConfiguration(save_on_each_node=True)."""
        if getattr(self.project_configuration, "save_on_each_node", False):
            return self.is_local_main_process
        return self.is_main_process

    # ---- profiling --------------------------------------------------------------------
    @contextmanager
    def profile(self, profile_handler: Any = None):
        """`torch.profiler.profile` over the block (settings from ProfileKwargs); with
        `output_trace_dir`, each process writes `profile_<process_index>.json` there."""
        handler = profile_handler or self.profile_handler or config.ProfileKwargs()
        with handler.build() as profiler:
            yield profiler
        if handler.output_trace_dir is None:
            return
        os.makedirs(handler.output_trace_dir, exist_ok=True)
        trace = os.path.join(handler.output_trace_dir, f"profile_{self.process_index}.json")
        profiler.export_chrome_trace(trace)
        self.wait_for_everyone()

    @contextmanager
    def maybe_context_parallel(self, buffers=None, buffer_seq_dims=None, no_restore_buffers=None):
        """Context parallelism needs FSDP2; as in HF without it, the block runs unchanged."""
        warnings.warn(
            "context parallelism is not enabled (it needs FSDP2): no effect", stacklevel=3
        )
        yield

    # ---- collectives -------------------------------------------------------------------
    def gather(self, tensor: Any) -> Any:
        return collectives.gather(tensor)

    def gather_for_metrics(self, input_data: Any, use_gather_object: bool = False) -> Any:
        """`gather`, minus the samples `even_batches` duplicated into the last batch."""
        as_objects = use_gather_object or not collectives.is_tensor_tree(input_data)
        if as_objects:
            gathered = collectives.gather_object(input_data)
        else:
            gathered = collectives.gather(input_data)
        remainder = self.gradient_state.remainder
        if self.num_processes > 1 and self.gradient_state.end_of_dataloader and remainder > 0:
            if as_objects:
                return gathered[:remainder]
            return collectives.apply_to_tensors(lambda tensor: tensor[:remainder], gathered)
        return gathered

    def reduce(self, tensor: Any, reduction: str = "sum", scale: float = 1.0) -> Any:
        return collectives.reduce(tensor, reduction, scale)

    def pad_across_processes(
        self, tensor: Any, dim: int = 0, pad_index: int = 0, pad_first: bool = False
    ) -> Any:
        return collectives.pad_across_processes(tensor, dim, pad_index, pad_first)

    # ---- models and checkpoints --------------------------------------------------------
    def unwrap_model(
        self,
        model: torch.nn.Module,
        keep_fp32_wrapper: bool = True,
        keep_torch_compile: bool = True,
    ) -> torch.nn.Module:
        return wrappers.unwrap_model(model, keep_fp32_wrapper, keep_torch_compile)

    def get_state_dict(self, model: torch.nn.Module, unwrap: bool = True) -> dict:
        return (self.unwrap_model(model) if unwrap else model).state_dict()

    def verify_device_map(self, model: torch.nn.Module) -> bool:
        """Whether the model was split over devices with a big-model `device_map`."""
        return any(len(getattr(m, "hf_device_map", {})) > 1 for m in model.modules())

    def free_memory(self, *objects: Any) -> list:
        """Drops this accelerator's references to prepared objects; returns one None per object."""
        self._models.clear()
        self._optimizers.clear()
        self._schedulers.clear()
        self._dataloaders.clear()
        self.step = 0
        gc.collect()
        if torch.cuda.is_available() and torch.cuda.is_initialized():
            torch.cuda.empty_cache()
        return [None for _ in objects]

    clear = free_memory

    def __deepcopy__(self, memo):
        return self  # as in HF: a copy of a training setup is the same setup
