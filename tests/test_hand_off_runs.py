"""The hand-off goldens on 2 processes: the prepared model handed to helpers of other modules
(the unmigrated calls raise AttributeError on the wrapper, or save `module.` keys), a part of a
model prepared with it, host copies and labels kept on the host, devices read from tensors,
progress bars drawn once; and a program whose helper modules save, read and load back the
model, verified against the original."""

from __future__ import annotations

import io
import os
import re
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests.fixtures import ROOT
from tests.golden_runs import launch_fixtures

HELPER_MODULES = {
    "checkpoints.py": textwrap.dedent("""\
        import os

        import torch


        def save_checkpoint(model, path):
            torch.save(model.state_dict(), path)


        def load_checkpoint(path, model):
            if os.path.exists(path):
                model.load_state_dict(torch.load(path))
        """),
    "plots.py": textwrap.dedent("""\
        def visualize_latent_space(model, path):
            with open(path, "w") as handle:
                handle.write(f"latent {model.latent_dim}\\n")
        """),
    "metrics.py": textwrap.dedent("""\
        import torch


        def evaluate(model, x):
            with torch.no_grad():
                return model(x).abs().mean().item()
        """),
    "utils.py": textwrap.dedent("""\
        import torch


        def export_weights(model, path):
            torch.save({name: value.clone() for name, value in model.state_dict().items()}, path)


        def tidy(model):
            model.train()
        """),
}
FIXTURES = [
    "model_handed_to_imported_helpers",
    "model_part_prepared_with_model",
    "device_read_from_tensor",
    "host_copies_kept",
    "host_labels_through_parameter",
    "progress_bar_never_disabled",
]


@pytest.fixture(scope="module")
def launched(tmp_path_factory):
    import torch

    folder = tmp_path_factory.mktemp("hand_offs")
    torch.manual_seed(1)
    initial = {"encoder.weight": torch.randn(2, 4), "encoder.bias": torch.zeros(2),
               "decoder.weight": torch.randn(4, 2), "decoder.bias": torch.zeros(4)}  # fmt: skip
    buffer = io.BytesIO()
    torch.save(initial, buffer)  # a plain checkpoint, loaded into the model after prepare
    beside = {"model_handed_to_imported_helpers": {**HELPER_MODULES,
                                                   "initial.pt": buffer.getvalue()}}  # fmt: skip
    return folder, launch_fixtures(folder, FIXTURES, beside=beside)


@pytest.mark.slow
def test_helpers_get_the_model_itself_and_write_once(launched):
    import torch

    folder, done = launched
    out = done.stdout
    assert len(re.findall(r"^epoch \d error \d", out, re.MULTILINE)) == 2, out
    here = folder / "model_handed_to_imported_helpers"
    assert (here / "latents_1.txt").read_text() == "latent 2\n"  # read on the model itself
    for saved in ("epoch_1.pt", "weights.pt"):
        assert sorted(torch.load(here / saved)) == [
            "decoder.bias",
            "decoder.weight",
            "encoder.bias",
            "encoder.weight",
        ]  # no `module.` prefix


@pytest.mark.slow
def test_a_part_prepared_with_its_model_saves_plain_keys(launched):
    import torch

    folder, _ = launched
    state = torch.load(folder / "model_part_prepared_with_model" / "autoencoder.pt")
    assert sorted(state) == ["decoder.bias", "decoder.weight", "encoder.bias", "encoder.weight"]


@pytest.mark.slow
def test_the_other_goldens_finish_and_print_once(launched):
    _, done = launched
    out = done.stdout
    assert len(re.findall(r"^epoch \d loss [0-9.]+ sample -?[0-9.]+$", out, re.MULTILINE)) == 2
    assert len(re.findall(r"^epoch \d loss [0-9.]+$", out, re.MULTILINE)) == 2
    # 2 batches a process, 3 images each
    assert len(re.findall(r"^epoch \d loss [0-9.]+ accuracy [0-9.]+ shown 6$", out,
                          re.MULTILINE)) == 2  # fmt: skip
    assert len(re.findall(r"^epoch \d train [0-9.]+ [0-9.]+ test [0-9.]+ [0-9.]+$", out,
                          re.MULTILINE)) == 2  # fmt: skip


@pytest.mark.slow
def test_a_bar_drawn_on_purpose_is_drawn_by_one_process(launched):
    _, done = launched
    assert out_count(done.stdout, "weight sum") == 1
    # each process would draw two `epochs` bars' final states; the main process alone does
    assert done.stderr.count("epochs: 100%") == 1, done.stderr[-2000:]


def out_count(text: str, needle: str) -> int:
    return sum(needle in line for line in text.splitlines())


@pytest.mark.slow
def test_a_program_handing_its_model_to_helper_modules_is_equivalent(tmp_path):
    work = tmp_path / "program"
    shutil.copytree(ROOT / "fixtures" / "programs" / "model_handed_to_helper_modules" / "in",
                    work)  # fmt: skip
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}
    for key in ("WORLD_SIZE", "RANK", "LOCAL_RANK"):
        env.pop(key, None)
    done = subprocess.run(
        [sys.executable, "-m", "migrator", "verify", "main.py", "--nproc", "2"],
        cwd=work, env=env, capture_output=True, text=True, timeout=600, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "EQUIVALENT" in done.stdout
    assert "files: 1 written by the original, each by one process" in done.stdout
    assert Path(work / "main.py").read_text().startswith('"""A program')  # not written
