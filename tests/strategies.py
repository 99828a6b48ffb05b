"""Hypothesis strategies: training scripts in the shapes of the seeds, composed from independent
choices, so properties hold across every combination rather than the ones we wrote by hand."""

from __future__ import annotations

import textwrap
from dataclasses import dataclass

from hypothesis import strategies as st

IDENTIFIERS = st.sampled_from(["model", "net", "classifier", "encoder", "student"])
OPTIMIZER_NAMES = st.sampled_from(["optimizer", "opt", "optim_sgd"])
LOADER_NAMES = st.sampled_from(["train_loader", "train_dataloader", "loader", "dl"])


@dataclass
class Script:
    source: str
    model: str
    optimizer: str
    loader: str
    batch_names: tuple[str, ...]
    has_eval: bool


DEVICE_FORMS = [
    'device = "cuda" if torch.cuda.is_available() else "cpu"',
    'device = torch.device("cuda" if torch.cuda.is_available() else "cpu")',
    'device = torch.device("cuda") if torch.cuda.is_available() else torch.device("cpu")',
]
IMPORT_FORMS = {
    "qualified": ("", "torch.optim.SGD", "torch.utils.data.DataLoader"),
    "module_alias": ("import torch.optim as optim\n", "optim.SGD", "torch.utils.data.DataLoader"),
    "from_alias": (
        "from torch.optim import SGD as Opt\nfrom torch.utils.data import DataLoader as DL\n",
        "Opt",
        "DL",
    ),
}


def _placement(form: str, model: str) -> tuple[str, str]:
    """(constructor line, placement line) for the model."""
    if form == "chained":
        return f"{model} = nn.Linear(4, 1).to(device)", ""
    if form == "separate":
        return f"{model} = nn.Linear(4, 1)", f"{model}.to(device)"
    if form == "reassign":
        return f"{model} = nn.Linear(4, 1)", f"{model} = {model}.to(device)"
    return f"{model} = nn.Linear(4, 1).cuda()", ""


def _batch(form: str, loader: str) -> tuple[str, list[str], tuple[str, ...]]:
    """(for header, body lines that place the batch, names holding the inputs/targets)."""
    if form == "tuple_target":
        return f"for x, y in {loader}:", ["x, y = x.to(device), y.to(device)"], ("x", "y")
    if form == "per_name":
        return f"for x, y in {loader}:", ["x = x.to(device)", "y = y.to(device)"], ("x", "y")
    if form == "indexed":
        return (
            f"for batch in {loader}:",
            ["x = batch[0].to(device, non_blocking=True)", "y = batch[1].to(device)"],
            ("x", "y"),
        )
    if form == "enumerate":
        return (
            f"for step, (x, y) in enumerate({loader}):",
            ["x, y = x.to(device), y.to(device)"],
            ("x", "y"),
        )
    if form == "tuple_generator":
        return (
            f"for batch in {loader}:",
            ["batch = tuple(t.to(device) for t in batch)", "x, y = batch"],
            ("x", "y", "batch"),
        )
    return f"for x, y in {loader}:", ["x, y = x.cuda(), y.cuda()"], ("x", "y")


@st.composite
def training_scripts(draw) -> Script:
    model = draw(IDENTIFIERS)
    optimizer = draw(OPTIMIZER_NAMES)
    loader = draw(LOADER_NAMES)
    scope = draw(st.sampled_from(["module", "main", "main_guard"]))
    imports, optimizer_class, loader_class = IMPORT_FORMS[
        draw(st.sampled_from(sorted(IMPORT_FORMS)))
    ]
    device_line = draw(st.sampled_from(DEVICE_FORMS))
    placement_form = draw(st.sampled_from(["chained", "separate", "reassign", "cuda"]))
    batch_form = draw(st.sampled_from(
        ["tuple_target", "per_name", "indexed", "enumerate", "tuple_generator", "cuda"]
    ))  # fmt: skip
    scheduler = draw(st.sampled_from(["none", "per_step", "per_epoch", "sized_by_len"]))
    has_eval = draw(st.booleans())
    backward = draw(st.sampled_from(["loss.backward()", "loss.backward(retain_graph=False)"]))

    constructor, placement = _placement(placement_form, model)
    header, placing, batch_names = _batch(batch_form, loader)
    if batch_form == "cuda" or placement_form == "cuda":
        device_line = ""  # the .cuda() idiom has no device variable
    setup = [
        "torch.manual_seed(0)",
        device_line,
        "data = TensorDataset(torch.randn(64, 4), torch.randn(64, 1))",
        f"{loader} = {loader_class}(data, batch_size=16, shuffle=True)",
        f"eval_loader = {loader_class}(data, batch_size=16)" if has_eval else "",
        constructor,
        f"{optimizer} = {optimizer_class}({model}.parameters(), lr=0.1)",
        placement,
    ]
    step_line = ""
    epoch_step = ""
    if scheduler == "per_step":
        setup.append(f"scheduler = torch.optim.lr_scheduler.LinearLR({optimizer}, total_iters=8)")
        step_line = "scheduler.step()"
    elif scheduler == "per_epoch":
        setup.append(f"scheduler = torch.optim.lr_scheduler.StepLR({optimizer}, step_size=1)")
        epoch_step = "scheduler.step()"
    elif scheduler == "sized_by_len":
        setup.append(f"total = 2 * len({loader})")
        setup.append(
            f"scheduler = torch.optim.lr_scheduler.LinearLR({optimizer}, total_iters=total)"
        )
        step_line = "scheduler.step()"
    body = [
        *placing,
        f"loss = nn.functional.mse_loss({model}(x), y)",
        f"{optimizer}.zero_grad()",
        backward,
        f"{optimizer}.step()",
        step_line,
    ]
    loop = ["for epoch in range(2):", "    " + header]
    loop += ["        " + line for line in body if line]
    if epoch_step:
        loop.append("    " + epoch_step)
    if has_eval:
        loop += [
            "with torch.no_grad():",
            "    for x, y in eval_loader:",
            "        x, y = x.to(device), y.to(device)" if device_line else "        pass",
            f"        print(nn.functional.mse_loss({model}(x), y).item())",
        ]
    code = [line for line in setup if line] + loop
    if scope == "module":
        body_text = "\n".join(code)
        tail = ""
    else:
        body_text = "def main():\n" + textwrap.indent("\n".join(code), "    ")
        tail = (
            '\n\n\nif __name__ == "__main__":\n    main()'
            if scope == "main_guard"
            else ("\n\n\nmain()")
        )
    source = (
        "import torch\nfrom torch import nn\nfrom torch.utils.data import TensorDataset\n"
        "import torch.utils.data\n" + imports + "\n\n" + body_text + tail + "\n"
    )
    return Script(source, model, optimizer, loader, batch_names, has_eval)
