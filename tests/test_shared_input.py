"""MIG030 on `input(...)` run on every process: the answer is read once, on the main process,
and broadcast to the others, so every process decides alike (how many epochs, when to stop)
and only one prompt shows. A program's own `input`, and a prompt only the main process
reaches, are left as they are."""

from __future__ import annotations

import os
import subprocess
import sys

from migrator.engine import migrate_text
from tests.test_idioms_objects import LAUNCH_TIMEOUT, ROOT

PROMPTED = """\
import torch
from torch.utils.data import DataLoader, TensorDataset
{own}

def ask(question):
    return input(question).strip()


loader = DataLoader(TensorDataset(torch.randn(32, 4), torch.randint(0, 3, (32,))), batch_size=8)
model = torch.nn.Linear(4, 3)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
epochs = int(input("epochs? "))
for epoch in range(epochs):
    for x, y in loader:
        loss = torch.nn.functional.cross_entropy(model(x), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    print(f"epoch {{epoch}} done")
while True:
    text = ask("query> ")
    if text == "q":
        break
    print("answer", model(torch.ones(1, 4)).argmax().item())
"""

SHARED = "runtime.utils.broadcast_object_list([{call} if accelerator.is_main_process else None])[0]"


def _migrate(source: str) -> str:
    output, findings = migrate_text(source)
    assert output is not None, [f.message for f in findings]
    return output


def test_a_prompt_on_every_process_is_read_on_the_main_one_and_shared():
    output = _migrate(PROMPTED.format(own=""))
    assert "import runtime.utils\n" in output
    epochs = SHARED.format(call='input("epochs? ")')
    assert f"epochs = int({epochs})\n" in output
    # in a helper every process calls, each time round the loop
    assert f"    return {SHARED.format(call='input(question)')}.strip()\n" in output


def test_a_programs_own_input_is_left():
    own = "\n\ndef input(prompt):\n    return '1'\n"
    output = _migrate(PROMPTED.format(own=own))
    assert "broadcast_object_list" not in output
    assert 'epochs = int(input("epochs? "))\n' in output


def test_a_prompt_only_the_main_process_reaches_is_left():
    source = (
        PROMPTED.format(own="")
        .replace(
            '    print(f"epoch {epoch} done")\n',
            '    print(f"epoch {epoch} done")\n'
            "    if epoch == epochs - 1 and int(os.environ.get('RANK', 0)) == 0:\n"
            "        input('press enter')\n",
        )
        .replace("import torch\n", "import os\n\nimport torch\n", 1)
    )
    output = _migrate(source)
    assert "        input('press enter')\n" in output


def test_two_processes_read_one_answer_and_decide_alike(tmp_path):
    """The answers come on the launcher's standard input, which the main process reads: both
    processes train 2 epochs and leave the query loop at the same "q"."""
    script = tmp_path / "migrated.py"
    script.write_text(_migrate(PROMPTED.format(own="")))
    env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONPATH=str(ROOT))
    env.pop("WORLD_SIZE", None)
    command = [sys.executable, "-m", "migrator", "launch", "--nproc", "2", str(script)]
    done = subprocess.run(command, input="2\nwhat\nq\n", capture_output=True, text=True,
                          env=env, cwd=tmp_path, timeout=LAUNCH_TIMEOUT, check=False)  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.count("epoch 1 done") == 1 and "epoch 2 done" not in done.stdout
    assert done.stdout.count("answer") == 1
    assert done.stdout.count("epochs? ") == 1
