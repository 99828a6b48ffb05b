"""Read-only diagnostics of a model: summaries and counts of its layers, parameters or FLOPs,
and watchers that hook its gradients (`wandb.watch`).

A script runs them once, before training, on the plain model; they train nothing, so they may
see the model before `accelerator.prepare(...)` as the original's did. Those that trace a
forward on a made-up input (`torchsummary.summary(model, (3, 224, 224))` puts it on CUDA
unless told otherwise) need the model where the original had placed it by then.
"""

from __future__ import annotations

# Diagnostics that run the model's forward on an input they make.
TRACING = {
    "torchsummary.summary", "torchsummary.summary_string", "torchinfo.summary",
    "torchsummaryX.summary", "pytorch_model_summary.summary", "thop.profile",
    "ptflops.get_model_complexity_info", "fvcore.nn.FlopCountAnalysis", "torchstat.stat",
    "torchscan.summary", "torchscan.crawl_module",
}  # fmt: skip
# Diagnostics whose `device=` is text ("cuda" / "cpu"), never a torch.device.
DEVICE_AS_TEXT = {"torchsummary.summary", "torchsummary.summary_string"}
# Diagnostics that read the model's parameters only.
READING = {
    "fvcore.nn.parameter_count", "fvcore.nn.parameter_count_table", "torchinfo.ModelStatistics",
}  # fmt: skip
# Watchers that register hooks on the model's modules and parameters and run nothing: the
# hooks stay on the module a DDP wrap holds, and fire in its forward and backward.
WATCHING = {"wandb.watch"}


def is_diagnostic(qualified: str | None) -> bool:
    """Is `qualified` (a callee's qualified name) a read-only diagnostic of a model?"""
    return qualified in TRACING or qualified in READING or qualified in WATCHING


def traces_forward(qualified: str | None) -> bool:
    """Does the diagnostic `qualified` run the model's forward (so it needs it placed)?"""
    return qualified in TRACING


def takes_device_text(qualified: str | None) -> bool:
    """Does the diagnostic `qualified` take its device as text (`device="cuda"`)?"""
    return qualified in DEVICE_AS_TEXT
