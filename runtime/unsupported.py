"""What runtime does not implement, and the clear error each asks for.

runtime is DDP on torch.distributed. HF Accelerate's DeepSpeed, FSDP, Megatron-LM, tensor /
context parallelism, TPU (XLA), fp8 and torch.compile integrations are not here: asking for
one (an Accelerator argument, an ACCELERATE_USE_* variable, or an attribute that only exists
with that backend) raises NotImplementedError naming it, never an AttributeError. Attributes
that HF itself answers with None or False when the backend is off (`deepspeed_plugin`,
`state.fsdp_plugin`, `torch_device_mesh`, `is_fsdp2`, ...) answer the same here, so scripts
that test for a backend keep running.
"""

from __future__ import annotations

from typing import Any

from runtime.state import env_flag

DEEPSPEED = "needs DeepSpeed, which runtime does not support (it runs DDP on torch.distributed)"
FSDP = "needs FSDP, which runtime does not support (it runs DDP on torch.distributed)"
MEGATRON = "needs Megatron-LM, which runtime does not support (it runs DDP on torch.distributed)"
PARALLELISM = (
    "needs tensor / context / pipeline parallelism (ParallelismConfig), which runtime does not "
    "support (it runs DDP on torch.distributed)"
)
XLA = "needs TPUs (torch_xla), which runtime does not support"
FP8 = "needs fp8 training (TransformerEngine, torchao or MS-AMP), which runtime does not support"
LOMO = "needs a LOMO optimizer (lomo_optim), which runtime does not support"

UNSUPPORTED_ATTRIBUTES = {
    "deepspeed_config": DEEPSPEED,
    "deepspeed_engine_wrapped": DEEPSPEED,
    "deepspeed_plugins": DEEPSPEED,
    "deepspeed_ulysses_dl_adapter": DEEPSPEED,
    "_prepare_deepspeed": DEEPSPEED,
    "fsdp_plugin": FSDP,
    "_prepare_fsdp2": FSDP,
    "megatron_lm_plugin": MEGATRON,
    "_prepare_megatron_lm": MEGATRON,
    "tensor_parallel_rank": PARALLELISM,
    "pipeline_parallel_rank": PARALLELISM,
    "context_parallel_rank": PARALLELISM,
    "data_parallel_rank": PARALLELISM,
    "data_parallel_shard_rank": PARALLELISM,
    "_prepare_tp": PARALLELISM,
    "_prepare_cp": PARALLELISM,
    "_prepare_device_mesh": PARALLELISM,
    "fp8_backend": FP8,
    "_prepare_te": FP8,
    "_prepare_ao": FP8,
    "_prepare_msamp": FP8,
    "lomo_backward": LOMO,
}

_ENVIRONMENT = {
    "ACCELERATE_USE_DEEPSPEED": "DeepSpeed",
    "ACCELERATE_USE_FSDP": "FSDP",
    "ACCELERATE_USE_MEGATRON_LM": "Megatron-LM",
    "ACCELERATE_USE_PARALLELISM_CONFIG": "ParallelismConfig (tensor/context parallelism)",
}


def check_backends(*, mixed_precision: Any = None, **arguments: Any) -> None:
    """Raises NotImplementedError for any Accelerator argument or variable asking for a
    backend runtime lacks, or ValueError for an unknown mixed precision."""
    backends = {
        "deepspeed_plugin": "DeepSpeed",
        "fsdp_plugin": "FSDP",
        "megatron_lm_plugin": "Megatron-LM",
        "torch_tp_plugin": "tensor parallelism",
        "parallelism_config": "ParallelismConfig (tensor/context parallelism)",
    }
    for argument, backend in backends.items():
        if arguments.get(argument) is not None:
            raise NotImplementedError(
                f"Accelerator({argument}=...) needs {backend}, which runtime does not support "
                "(it runs DDP on torch.distributed)"
            )
    for variable, backend in _ENVIRONMENT.items():
        if env_flag(variable, False):
            raise NotImplementedError(
                f"{variable} asks for {backend}, which runtime does not support "
                "(it runs DDP on torch.distributed); unset it"
            )
    dynamo = arguments.get("dynamo_backend")
    plugin = arguments.get("dynamo_plugin")
    if plugin is not None:
        dynamo = getattr(plugin, "backend", dynamo)
    if dynamo is not None and str(getattr(dynamo, "value", dynamo)).lower() != "no":
        raise NotImplementedError(
            "torch.compile through the Accelerator (dynamo_backend) is not implemented by "
            "runtime: call torch.compile(model) in the script"
        )
    if mixed_precision is None:
        return
    precision = str(getattr(mixed_precision, "value", mixed_precision)).lower()
    if precision == "fp8":
        raise NotImplementedError(f"mixed_precision='fp8' {FP8}")
    if precision not in ("no", "fp16", "bf16"):
        raise ValueError(f"mixed_precision must be 'no', 'fp16' or 'bf16', not {mixed_precision!r}")
