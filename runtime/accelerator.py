"""The public `Accelerator`: HF Accelerate 1.x names and semantics, delegating to the modules.

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
from contextlib import ExitStack, contextmanager
from typing import Any

import torch
from torch.utils.data import DataLoader
from torch.utils.hooks import RemovableHandle

from runtime import checkpoint, collectives, config, data, state, wrappers
from runtime.process_control import ProcessControl
from runtime.unsupported import UNSUPPORTED_ATTRIBUTES, check_backends


class Accelerator(ProcessControl):
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
        self.dataloader_config = _dataloader_config(dataloader_config, split_batches, even_batches)
        handlers = _kwargs_handlers(kwargs_handlers)
        self.ddp_handler = handlers.get("DistributedDataParallelKwargs")
        self.scaler_handler = handlers.get("GradScalerKwargs")
        self.init_handler = handlers.get("InitProcessGroupKwargs")
        self.autocast_handler = handlers.get("AutocastKwargs")
        self.profile_handler = handlers.get("ProfileKwargs")

        cpu = cpu or bool(state.env_flag("ACCELERATE_USE_CPU", False))
        init_kwargs = self.init_handler.to_kwargs() if self.init_handler else {}
        self.state = state.accelerator_state_for(mixed_precision, cpu, init_kwargs)
        wrappers.check_mixed_precision(self.mixed_precision, self.device)
        if self.state.scaler is None:
            scaler_kwargs = self.scaler_handler.to_kwargs() if self.scaler_handler else {}
            self.state._scaler = wrappers.make_grad_scaler(
                self.mixed_precision, self.device, **scaler_kwargs
            )
        self.gradient_state = state.GradientState()
        plugin = _accumulation_plugin(gradient_accumulation_plugin, gradient_accumulation_steps)
        if plugin is not None:
            self.gradient_state.configure(plugin)

        self.device_placement = device_placement
        self.step_scheduler_with_optimizer = step_scheduler_with_optimizer
        self.rng_types = rng_types if rng_types is not None else ["generator"]
        self.step = 0
        self.flag_tensor: torch.Tensor | None = None
        self.trackers: list = []
        self.log_with = _resolve_trackers(log_with, self.logging_dir)
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

    # ---- prepare -----------------------------------------------------------------------
    def prepare(self, *objects: Any, device_placement: list[bool] | None = None):
        """Prepares each object by type, in order; unknown or already prepared ones pass through."""
        placements = device_placement or [None] * len(objects)
        if len(placements) != len(objects):
            raise ValueError("device_placement needs one entry per object passed to prepare()")
        prepared = [self._prepare_one(obj, place) for obj, place in zip(objects, placements)]
        # schedulers last: they must find the prepared optimizer they drive
        prepared = [self._prepare_one(obj, None, schedulers=True) for obj in prepared]
        return prepared[0] if len(prepared) == 1 else tuple(prepared)

    def _prepare_one(self, obj: Any, placement: bool | None, schedulers: bool = False) -> Any:
        if getattr(obj, "_is_accelerate_prepared", False):
            return obj
        if schedulers:
            return self.prepare_scheduler(obj) if _is_scheduler(obj) else obj
        if isinstance(obj, DataLoader):
            return self.prepare_data_loader(obj, device_placement=placement)
        if isinstance(obj, torch.nn.Module):
            return self.prepare_model(obj, device_placement=placement)
        if isinstance(obj, torch.optim.Optimizer):
            return self.prepare_optimizer(obj, device_placement=placement)
        return obj

    def prepare_model(
        self,
        model: torch.nn.Module,
        device_placement: bool | None = None,
        evaluation_mode: bool = False,
    ) -> torch.nn.Module:
        if getattr(model, "_is_accelerate_prepared", False):
            return model
        placement = self.device_placement if device_placement is None else device_placement
        ddp_kwargs = self.ddp_handler.to_kwargs() if self.ddp_handler else {}
        for hook_option in ("comm_hook", "comm_wrapper", "comm_state_option"):
            ddp_kwargs.pop(hook_option, None)  # HF's handler registers these after wrapping
        self._models.append(wrappers.unwrap_model(model))  # HF keeps the unwrapped module
        prepared = wrappers.prepare_model(
            model,
            state=self.state.partial_state,
            mixed_precision=self.mixed_precision,
            device_placement=placement,
            evaluation_mode=evaluation_mode,
            ddp_kwargs=ddp_kwargs,
            autocast_kwargs=self.autocast_handler.to_kwargs() if self.autocast_handler else {},
        )
        if prepared is not model and hasattr(self.ddp_handler, "register_comm_hook"):
            self.ddp_handler.register_comm_hook(prepared)
        return prepared

    def prepare_optimizer(
        self, optimizer: torch.optim.Optimizer, device_placement: bool | None = None
    ) -> wrappers.PreparedOptimizer:
        if getattr(optimizer, "_is_accelerate_prepared", False):
            return optimizer
        placement = self.device_placement if device_placement is None else device_placement
        prepared = wrappers.PreparedOptimizer(
            optimizer,
            gradient_state=self.gradient_state,
            scaler=self.scaler,
            device_placement=placement,
        )
        self._optimizers.append(prepared)
        return prepared

    def prepare_data_loader(
        self, data_loader: DataLoader, device_placement: bool | None = None
    ) -> data.PreparedDataLoader:
        if getattr(data_loader, "_is_accelerate_prepared", False):
            return data_loader
        placement = self.device_placement if device_placement is None else device_placement
        prepared = data.prepare_data_loader(
            data_loader,
            state=self.state.partial_state,
            gradient_state=self.gradient_state,
            split_batches=self.split_batches,
            even_batches=self.even_batches,
            device_placement=placement,
        )
        self._dataloaders.append(prepared)
        return prepared

    def prepare_scheduler(self, scheduler) -> wrappers.PreparedScheduler:
        if getattr(scheduler, "_is_accelerate_prepared", False):
            return scheduler
        target = getattr(scheduler, "optimizer", None)
        driving = [
            optimizer
            for optimizer in self._optimizers
            if optimizer is target or optimizer.optimizer is target
        ]
        prepared = wrappers.PreparedScheduler(
            scheduler,
            optimizers=driving or list(self._optimizers),
            gradient_state=self.gradient_state,
            num_processes=self.num_processes,
            split_batches=self.split_batches,
            step_with_optimizer=self.step_scheduler_with_optimizer,
        )
        self._schedulers.append(prepared)
        return prepared

    def skip_first_batches(self, dataloader: DataLoader, num_batches: int = 0) -> DataLoader:
        """The loader without its first `num_batches` batches (this rank's, if prepared)."""
        return data.skip_first_batches(dataloader, num_batches)

    # ---- training step -----------------------------------------------------------------
    def backward(self, loss: torch.Tensor, **kwargs) -> None:
        """Divides by `gradient_accumulation_steps` (as HF does), then backward (scaled in fp16)."""
        steps = self.gradient_state.num_steps
        if steps > 1:
            inside = self.gradient_state.inside_accumulate
            if not inside and not self._warned_backward_outside_accumulate:
                self._warned_backward_outside_accumulate = True
                warnings.warn(
                    f"backward() divides the loss by gradient_accumulation_steps={steps}, but it "
                    "runs outside `with accelerator.accumulate(model):`, so every batch steps "
                    f"the optimizer with 1/{steps} of the gradient.",
                    stacklevel=2,
                )
            loss = loss / steps
        kwargs.pop("learning_rate", None)  # HF's LOMO argument; no LOMO optimizer here
        if self.scaler is not None:
            self.scaler.scale(loss).backward(**kwargs)
        else:
            loss.backward(**kwargs)

    def _do_sync(self) -> None:
        """One micro-step: sync every k-th, and on a loader's last batch (then restart)."""
        gradient_state = self.gradient_state
        if gradient_state.sync_with_dataloader and gradient_state.end_of_dataloader:
            self.step = 0
            gradient_state.sync_gradients = True
        else:
            self.step += 1
            gradient_state.sync_gradients = self.step % gradient_state.num_steps == 0

    @contextmanager
    def accumulate(self, *models: torch.nn.Module):
        """One micro-step: gradients sync (and optimizers step) every k-th call or at loader end."""
        self._do_sync()
        gradient_state = self.gradient_state
        skip_sync = not gradient_state.sync_gradients and not (
            gradient_state.sync_each_batch and self.use_distributed
        )
        gradient_state.inside_accumulate = True
        try:
            with ExitStack() as stack:
                for model in models if skip_sync else ():
                    stack.enter_context(wrappers.no_sync(model))
                yield
        finally:
            gradient_state.inside_accumulate = False

    def no_sync(self, model: torch.nn.Module):
        return wrappers.no_sync(model)

    @staticmethod
    @contextmanager
    def trigger_sync_in_backward(model: torch.nn.Module):
        """Makes the next backward of a DDP model inside `no_sync` all-reduce after all."""
        if not isinstance(model, torch.nn.parallel.DistributedDataParallel):
            yield
            return
        saved = model.require_backward_grad_sync, model.require_forward_param_sync
        model.require_backward_grad_sync = model.require_forward_param_sync = True
        model.reducer.prepare_for_backward([])
        try:
            yield
        finally:
            model.require_backward_grad_sync, model.require_forward_param_sync = saved

    def autocast(self, autocast_handler: Any = None):
        handler = autocast_handler or self.autocast_handler
        kwargs = handler.to_kwargs() if handler is not None else {}
        return wrappers.autocast_context(self.mixed_precision, self.device, **kwargs)

    def unscale_gradients(self, optimizer=None) -> None:
        if self.scaler is None or not self.gradient_state.sync_gradients:
            return
        targets = [optimizer] if optimizer is not None else self._optimizers
        for target in targets:
            self.scaler.unscale_(getattr(target, "optimizer", target))

    def clip_grad_norm_(self, parameters, max_norm: float, norm_type: float = 2):
        parameters = list(parameters)
        self.unscale_gradients()
        return torch.nn.utils.clip_grad_norm_(parameters, max_norm, norm_type=norm_type)

    def clip_grad_value_(self, parameters, clip_value: float) -> None:
        parameters = list(parameters)
        self.unscale_gradients()
        torch.nn.utils.clip_grad_value_(parameters, clip_value)

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

    # ---- trackers ----------------------------------------------------------------------
    def init_trackers(
        self, project_name: str, config: dict | None = None, init_kwargs: dict | None = None
    ) -> None:
        """Starts the `log_with` trackers (main process only) and stores `config` in them."""
        if not self.is_main_process:
            return
        from runtime import tracking

        for entry in self.log_with:
            made = tracking.create(entry, project_name, self.logging_dir, init_kwargs or {})
            self.trackers.append(made)
        for tracker in self.trackers:
            tracker.start()
        if config is not None:
            for tracker in self.trackers:
                tracker.store_init_configuration(config)

    def log(self, values: dict, step: int | None = None, log_kwargs: dict | None = None) -> None:
        """Logs `values` to every tracker (main process only)."""
        if not self.is_main_process:
            return
        for tracker in self.trackers:
            tracker.log(values, step=step, **(log_kwargs or {}).get(tracker.name, {}))

    def get_tracker(self, name: str, unwrap: bool = False):
        """The tracker called `name` (its underlying object with `unwrap=True`); a blank
        tracker that does nothing on the processes that have no trackers."""
        if not self.trackers:
            from runtime.tracking import GeneralTracker

            return GeneralTracker(_blank=True)
        for tracker in self.trackers:
            if tracker.name == name:
                return tracker.tracker if unwrap else tracker
        raise ValueError(f"{name} is not an available tracker stored inside the `Accelerator`.")

    def end_training(self) -> None:
        """Finishes the trackers, then a barrier and the process group's teardown."""
        for tracker in self.trackers:
            tracker.finish()
        state.shut_down_process_group()

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

    def save(self, obj: Any, f, safe_serialization: bool = False) -> None:
        """Saves on the main process only (each node's with save_on_each_node)."""
        if self.writes_checkpoints:
            from runtime import serialization

            serialization.write(obj, f, safe_serialization)

    def save_model(
        self,
        model: torch.nn.Module,
        save_directory: str | os.PathLike,
        max_shard_size: int | str = "10GB",
        safe_serialization: bool = True,
    ) -> None:
        """The unwrapped weights in `save_directory`: `model.safetensors`, or shards of at
        most `max_shard_size` plus `model.safetensors.index.json` (as HF writes them)."""
        from runtime import serialization

        if os.path.isfile(save_directory):
            raise ValueError(f"save_model: {save_directory} is a file, not a directory")
        if any(p.device.type == "meta" for p in model.parameters()):
            raise RuntimeError("save_model: some parameters are on the meta device")
        serialization.save_model(
            self.get_state_dict(model),
            save_directory,
            max_shard_size=max_shard_size,
            safe_serialization=safe_serialization,
            writes=self.writes_checkpoints,
        )

    def register_save_state_pre_hook(self, hook) -> RemovableHandle:
        """`hook(models, weights, output_dir)` runs in `save_state` before the models are
        written; popping an entry of `weights` keeps `save_state` from writing that model."""
        handle = RemovableHandle(self._save_model_state_pre_hook)
        self._save_model_state_pre_hook[handle.id] = hook
        return handle

    def register_load_state_pre_hook(self, hook) -> RemovableHandle:
        """`hook(models, input_dir)` runs in `load_state` first; popping a model from
        `models` keeps `load_state` from loading it."""
        handle = RemovableHandle(self._load_model_state_pre_hook)
        self._load_model_state_pre_hook[handle.id] = hook
        return handle

    def register_for_checkpointing(self, *objects: Any) -> None:
        """Objects with `state_dict`/`load_state_dict` that save_state/load_state also keep."""
        invalid = [
            type(obj).__name__
            for obj in objects
            if not (hasattr(obj, "state_dict") and hasattr(obj, "load_state_dict"))
        ]
        if invalid:
            raise ValueError(
                "register_for_checkpointing: every object needs state_dict() and "
                f"load_state_dict(); these have not: {', '.join(invalid)}"
            )
        self._custom_objects.extend(objects)

    def save_state(
        self,
        output_dir: str | os.PathLike | None = None,
        safe_serialization: bool = True,
        **save_model_func_kwargs,
    ):
        if getattr(self.project_configuration, "automatic_checkpoint_naming", False):
            output_dir = checkpoint.automatic_directory(self)
        elif output_dir is None and self.project_dir:
            output_dir = os.path.join(self.project_dir, "checkpoint")
        if output_dir is None:
            raise ValueError("save_state needs an output_dir (or Accelerator(project_dir=...))")
        saved = checkpoint.save_state(self, output_dir, safe_serialization)
        self.project_configuration.iteration += 1
        return saved

    def load_state(
        self,
        input_dir: str | os.PathLike | None = None,
        load_kwargs: dict | None = None,
        **load_model_func_kwargs,
    ) -> None:
        if input_dir is not None:
            input_dir = os.path.expanduser(input_dir)
            if not os.path.isdir(input_dir):
                raise ValueError(f"load_state: tried to find {input_dir} but folder does not exist")
        elif getattr(self.project_configuration, "automatic_checkpoint_naming", False):
            input_dir = checkpoint.latest_automatic_directory(self)
        elif self.project_dir:
            input_dir = os.path.join(self.project_dir, "checkpoint")
        else:
            raise ValueError("load_state needs an input_dir (or Accelerator(project_dir=...))")
        strict = load_model_func_kwargs.get("strict", True)
        checkpoint.load_state(self, input_dir, strict=strict)

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


def _is_scheduler(obj: Any) -> bool:
    schedulers = torch.optim.lr_scheduler
    return isinstance(obj, (schedulers.LRScheduler, schedulers.ReduceLROnPlateau))


def _dataloader_config(given: Any, split_batches: bool, even_batches: bool):
    """Our DataLoaderConfiguration from HF's or ours (duck typing) and the env overrides."""
    if given is not None:
        for option in ("dispatch_batches", "use_seedable_sampler", "use_stateful_dataloader"):
            if getattr(given, option, None):
                raise NotImplementedError(
                    f"DataLoaderConfiguration({option}=True) is not implemented by runtime"
                )
        split_batches = getattr(given, "split_batches", split_batches)
        even_batches = getattr(given, "even_batches", even_batches)
    return config.DataLoaderConfiguration(
        split_batches=bool(state.env_flag("MIGRATE_SPLIT_BATCHES", split_batches)),
        even_batches=bool(state.env_flag("MIGRATE_EVEN_BATCHES", even_batches)),
        non_blocking=bool(getattr(given, "non_blocking", False)),
        data_seed=getattr(given, "data_seed", None),
    )


_HANDLERS = {
    "DistributedDataParallelKwargs",
    "GradScalerKwargs",
    "InitProcessGroupKwargs",
    "AutocastKwargs",
    "ProfileKwargs",
}
_FP8_HANDLERS = {"FP8RecipeKwargs", "AORecipeKwargs", "TERecipeKwargs", "MSAMPRecipeKwargs"}


def _kwargs_handlers(handlers: list | None) -> dict:
    """Kwargs handlers (ours or HF's) by class name, at most one of each."""
    found: dict = {}
    for handler in handlers or []:
        kind = type(handler).__name__
        if kind in _FP8_HANDLERS:
            raise NotImplementedError(f"{kind}: fp8 training (TransformerEngine, torchao, MS-AMP)")
        if kind not in _HANDLERS:
            raise TypeError(f"unsupported kwargs handler {kind}; runtime takes {sorted(_HANDLERS)}")
        if kind in found:
            raise ValueError(f"You can only pass one {kind} in `kwargs_handlers`.")
        found[kind] = handler
    return found


def _accumulation_plugin(plugin: Any, steps: int | None):
    """What this Accelerator sets for accumulation process-wide; None keeps the current one."""
    if plugin is not None:
        if steps not in (None, 1):
            raise ValueError(
                "You can only pass one of `gradient_accumulation_steps` and "
                "`gradient_accumulation_plugin`."
            )
        return plugin
    if steps is None:
        from_env = os.environ.get("ACCELERATE_GRADIENT_ACCUMULATION_STEPS")
        steps = int(from_env) if from_env else None
    if steps is None:
        return None
    if steps < 1:
        raise ValueError("gradient_accumulation_steps must be at least 1")
    return config.GradientAccumulationPlugin(num_steps=steps)


def _resolve_trackers(log_with: Any, logging_dir: str | None) -> list:
    if log_with is None:
        return []
    from runtime import tracking  # only when trackers are asked for

    return tracking.resolve(log_with, logging_dir)
