"""Which tests of HF Accelerate's `test_utils/scripts` the conformance run calls, and how.

Each plan mirrors the script's own `main()`: the same setup, the same test functions with the
same arguments, in the same order (`m` is the script imported as a module). Where `main()`
runs a test only on GPUs, the plan runs it on CPU too and says so (`gated`): HF's CPU
behaviour is then measured, not assumed. `by_design` names the documented difference
(docs/runtime.md) and the error runtime must raise for it; `fails_on_cpu` names why HF's
own test cannot pass on CPU (runtime must then fail the same way); any other runtime failure
of a test HF passes is a conformance failure.
"""

from __future__ import annotations

from dataclasses import dataclass, field

GPU_GATED = "HF's main() runs it on GPUs only; run here on CPU"


@dataclass
class Test:
    label: str
    code: str
    gated: str | None = None
    by_design: tuple[str, str] | None = None  # (text runtime's error contains, why)
    # HF's own test cannot pass on CPU: (text of the error, why); runtime fails the same way
    fails_on_cpu: tuple[str, str] | None = None
    timeout: float | None = None


@dataclass
class Plan:
    path: str  # inside accelerate/test_utils/scripts
    setup: str
    teardown: str
    tests: list[Test]
    processes: int = 2  # 1: the script launches its own processes (run with plain python)
    env: dict = field(default_factory=dict)
    stand_ins: list[str] = field(default_factory=list)  # optional packages, stood in if absent
    not_run: list[tuple[str, str]] = field(default_factory=list)  # (test, why)
    # the tests build their own objects: a failure cannot leave state for the next one
    continue_after_failure: bool = False


def _calls(*names: str, argument: str = "") -> list[Test]:
    return [Test(name, f"m.{name}({argument})") for name in names]


FP16_ON_CPU = (
    "mixed_precision='fp16' needs an accelerator",
    (
        "fp16 on CPU is a ValueError in runtime (a silent fp32 no-op in HF); the last of the "
        "function's four trainings, after the three that compare, does it"
    ),
)

TEST_OPS = Plan(
    path="test_ops.py",
    setup="state = m.PartialState()",
    teardown="state.destroy_process_group()",
    tests=[
        *_calls(
            "test_gather",
            "test_gather_object",
            "test_gather_non_contiguous",
            "test_broadcast",
            "test_pad_across_processes",
            "test_reduce_sum",
            "test_reduce_mean",
            "test_reduce_max",
            "test_op_checker",
            argument="state",
        ),
        Test(
            "test_copy_tensor_to_devices",
            "m.test_copy_tensor_to_devices(state)",
            gated="returns at once unless MULTI_GPU / XLA",
        ),
    ],
)

TEST_SCRIPT = Plan(
    path="test_script.py",
    setup="accelerator = m.Accelerator()\nstate = accelerator.state",
    teardown="state.destroy_process_group()",
    tests=[
        *_calls(
            "init_state_check",
            "process_execution_check",
            "test_split_between_processes_list",
            "test_split_between_processes_nested_dict",
            "test_split_between_processes_tensor",
            "test_split_between_processes_evenly",
            "rng_sync_check",
            "dl_preparation_check",
            "central_dl_preparation_check",
            "custom_sampler_check",
            "check_seedable_sampler",
            "check_seedable_sampler_with_data_seed",
            "check_seedable_sampler_in_batch_sampler_shard",
        ),
        Test(
            "training_check(use_seedable_sampler=False)",
            "m.training_check(use_seedable_sampler=False)",
            by_design=FP16_ON_CPU,
        ),
        Test(
            "training_check(use_seedable_sampler=True)",
            "m.training_check(use_seedable_sampler=True)",
            by_design=FP16_ON_CPU,
        ),
        *_calls("test_trigger", "test_reinstantiated_state"),
    ],
    not_run=[("test_split_between_processes_dataset", "needs `datasets` (main() skips it too)")],
)


def _sync_matrix(function: str, skip_default: bool) -> list[Test]:
    tests = []
    for split in (True, False):
        for dispatch in (True, False):
            for each in (True, False):
                if skip_default and not (split or dispatch or each):
                    continue
                arguments = f"{split}, {dispatch}, {each}"
                tests.append(
                    Test(f"{function}({arguments})", f"m.{function}({arguments})", GPU_GATED)
                )
    return tests


TEST_SYNC = Plan(
    path="test_sync.py",
    setup="accelerator = m.Accelerator()\nstate = accelerator.state",
    teardown="state.destroy_process_group()",
    tests=[
        *_calls("test_dataloader_break"),
        *_calls(
            "test_distributed_sync", "test_distributed_sync_multiple_fwd", argument="accelerator"
        ),
        *_sync_matrix("test_gradient_accumulation", skip_default=False),
        *_calls("test_gradient_accumulation_with_opt_and_scheduler"),
        *_sync_matrix("test_gradient_accumulation_with_opt_and_scheduler", skip_default=True),
    ],
)

_JOIN_NON_DDP = """
original = accelerator.state.distributed_type
accelerator.state.distributed_type = m.DistributedType.FSDP
try:
    m.test_join_raises_warning_for_non_ddp_distributed(accelerator)
finally:
    accelerator.state.distributed_type = original
"""
_LOADER = "m.test_data_loader(m.DataLoader(m.DummyDataset(), {}), accelerator)"
_BATCH_SAMPLER = (
    "m.BatchSampler(m.RandomSampler(m.DummyDataset()), batch_size=m.BATCH_SIZE, drop_last=False)"
)
STATEFUL = (
    "use_stateful_dataloader",
    (
        "runtime has no stateful loaders (torchdata): a DataLoaderConfiguration asking for one "
        "is a NotImplementedError, raised where it is set"
    ),
)

TEST_DISTRIBUTED_DATA_LOOP = Plan(
    path="test_distributed_data_loop.py",
    setup="accelerator = m.create_accelerator()\nm.torch.manual_seed(accelerator.process_index)",
    teardown="accelerator.end_training()",
    tests=[
        *_calls(
            "test_default_ensures_even_batch_sizes",
            "test_can_disable_even_batches",
            "test_can_join_uneven_inputs",
            "test_join_can_override_even_batches",
            "test_join_can_override_for_mixed_type_dataloaders",
            "test_join_raises_warning_for_iterable_when_overriding_even_batches",
        ),
        Test("test_join_raises_warning_for_non_ddp_distributed", _JOIN_NON_DDP),
        *_calls("test_pickle_accelerator"),
        Test(
            "test_data_loader(shuffle=False)",
            _LOADER.format("shuffle=False, batch_size=m.BATCH_SIZE, num_workers=m.NUM_WORKERS"),
        ),
        Test(
            "test_data_loader(shuffle=True)",
            _LOADER.format("shuffle=True, batch_size=m.BATCH_SIZE, num_workers=m.NUM_WORKERS"),
        ),
        Test(
            "test_data_loader(batch_sampler=BatchSampler)",
            _LOADER.format(f"batch_sampler={_BATCH_SAMPLER}, num_workers=m.NUM_WORKERS"),
        ),
        Test(
            "test_data_loader(sampler=BatchSampler, batch_size=None)",
            _LOADER.format(
                f"sampler={_BATCH_SAMPLER}, batch_size=None, collate_fn=m.default_collate, "
                "num_workers=m.NUM_WORKERS"
            ),
        ),
        Test(
            "test_stateful_dataloader",
            "m.test_stateful_dataloader(accelerator)",
            by_design=STATEFUL,
        ),
        Test(
            "test_stateful_dataloader_save_state",
            "m.test_stateful_dataloader_save_state(accelerator)",
            by_design=STATEFUL,
        ),
    ],
)

_HOOKS = [
    ("NO", "NO", "{}"),
    ("FP16", "NO", "{}"),
    ("BF16", "NO", "{}"),
    ("POWER_SGD", "NO", "{}"),
    ("POWER_SGD", "FP16", "{}"),
    ("POWER_SGD", "BF16", "{}"),
    ("POWER_SGD", "NO", '{"matrix_approximation_rank": 2}'),
    ("BATCHED_POWER_SGD", "NO", "{}"),
    ("BATCHED_POWER_SGD", "FP16", "{}"),
    ("BATCHED_POWER_SGD", "BF16", "{}"),
]

REFERENCE_DDP_NEEDS_GPU = (
    "device_ids and output_device arguments only work",
    "the test's reference DistributedDataParallel(device_ids=[rank]) needs a GPU",
)
BF16_HOOK_NEEDS_NCCL = (
    "BF16 all reduce communication hook required",
    "torch's bf16 compression hook needs NCCL (or XCCL)",
)

TEST_DDP_COMM_HOOK = Plan(
    path="test_ddp_comm_hook.py",
    continue_after_failure=True,  # each test makes its own Accelerator and models
    setup="",
    teardown="m.PartialState().destroy_process_group()",
    tests=[
        Test(
            f"test_ddp_comm_hook({hook}, {wrapper}, {option})",
            f"m.test_ddp_comm_hook(m.DDPCommunicationHookType.{hook}, "
            f"m.DDPCommunicationHookType.{wrapper}, {option})",
            fails_on_cpu=BF16_HOOK_NEEDS_NCCL
            if "BF16" in (hook, wrapper)
            else REFERENCE_DDP_NEEDS_GPU,
        )
        for hook, wrapper, option in _HOOKS
    ],
)

TEST_NOTEBOOK = Plan(
    path="test_notebook.py",
    processes=1,
    env={"ACCELERATE_NUM_PROCESSES": "2"},
    setup="",
    teardown="m.PartialState().destroy_process_group()",
    tests=[
        *_calls(
            "test_can_initialize",
            "test_clean_cuda_fork",
            "test_static_rdzv_backend",
            "test_c10d_rdzv_backend",
        ),
        # each failed round waits for its workers to stop (HF: about 30 s a round here)
        Test("test_fault_tolerant", "m.test_fault_tolerant()", timeout=300),
        *_calls("test_monitoring"),
    ],
    not_run=[("test_problematic_imports", "needs bitsandbytes (main() skips it too)")],
)


def _metrics_with(split: bool, dispatch: bool) -> Test:
    return Test(
        f"test_torch_metrics(99, split_batches={split}, dispatch_batches={dispatch})",
        "accelerator = m.Accelerator(dataloader_config=m.DataLoaderConfiguration("
        f"split_batches={split}, dispatch_batches={dispatch}))\n"
        "m.test_torch_metrics(accelerator, 99)\naccelerator.state._reset_state()",
    )


TEST_METRICS = Plan(
    path="external_deps/test_metrics.py",
    stand_ins=["datasets", "evaluate", "transformers"],
    setup=(
        "accelerator = m.Accelerator(dataloader_config=m.DataLoaderConfiguration("
        "split_batches=False, dispatch_batches=False))"
    ),
    teardown="accelerator.end_training()",
    tests=[
        Test(
            "test_gather_for_metrics_with_iterable_dataset",
            "m.test_gather_for_metrics_with_iterable_dataset()",
            gated=GPU_GATED,
        ),
        Test(
            "test_gather_for_metrics_with_non_tensor_objects_iterable_dataset",
            "m.test_gather_for_metrics_with_non_tensor_objects_iterable_dataset()",
            gated=GPU_GATED,
        ),
        *[_metrics_with(split, dispatch) for split in (True, False) for dispatch in (True, False)],
        Test(
            "test_torch_metrics(512)",
            "accelerator = m.Accelerator()\nm.test_torch_metrics(accelerator, 512)\n"
            "accelerator.state._reset_state()",
        ),
        *_calls("test_gather_for_metrics_drop_last"),
    ],
    not_run=[("test_mrpc", "downloads a model and GLUE from the Hub (main() runs it on GPUs)")],
)

PLANS = {
    "test_ops": TEST_OPS,
    "test_script": TEST_SCRIPT,
    "test_sync": TEST_SYNC,
    "test_distributed_data_loop": TEST_DISTRIBUTED_DATA_LOOP,
    "test_ddp_comm_hook": TEST_DDP_COMM_HOOK,
    "test_notebook": TEST_NOTEBOOK,
    "test_metrics": TEST_METRICS,
}
