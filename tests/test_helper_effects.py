"""Writes in project helpers the migrated file calls (migrator/program/helper_effects.py,
SPEC §3b.2): a helper module with no training step of its own is not migrated, so its calls
are guarded where the migrated code makes them. Golden program fixture
programs/helper_module_writes holds the reviewed migration; here the names a helper is
called by, the helpers that are not writes, and the migrated program on two processes."""

from __future__ import annotations

import ast
import shutil
import textwrap

import pytest

from migrator.program.helper_effects import helper_effects
from tests.test_idioms_objects import launch
from tests.test_programs import PROGRAMS

WRITER = """\
import json
import os


def write_report(path, data):
    with open(path, "w") as handle:
        json.dump(data, handle)


def report_twice(path, data):
    write_report(path, data)
    write_report(path + ".bak", data)


def read_report(path):
    with open(path) as handle:
        return json.load(handle)


def write_on_rank_zero(path, data):
    if int(os.environ.get("RANK", 0)) == 0:
        write_report(path, data)


def _private_write(path):
    open(path, "w").close()
"""


def _effects(tmp_path, importer: str, layout: dict[str, str]) -> set[str]:
    for name, text in {**layout, "main.py": importer}.items():
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))
    main = tmp_path / "main.py"
    return set(helper_effects(ast.parse(main.read_text()), main))


@pytest.mark.parametrize(
    ("importer", "layout", "expected"),
    [
        ("from reports import write_report\n", {"reports.py": WRITER}, {"reports.write_report"}),
        (
            "import reports as r\n",
            {"reports.py": WRITER},
            {"reports.write_report", "reports.report_twice", "reports._private_write"},
        ),
        (
            "from reports import *\n",
            {"reports.py": WRITER},
            {"write_report", "report_twice"},
        ),
        (
            "from util import reports\n",
            {"util/__init__.py": "", "util/reports.py": WRITER},
            {
                "util.reports.write_report",
                "util.reports.report_twice",
                "util.reports._private_write",
            },
        ),
        (
            "from util.reports import report_twice as twice\n",
            {"util/__init__.py": "", "util/reports.py": WRITER},
            {"util.reports.report_twice"},
        ),
    ],
    ids=["from-import", "import-as", "star", "package-module", "from-package-as"],
)
def test_a_writing_helper_is_known_by_the_name_the_file_calls_it(
    tmp_path, importer, layout, expected
):
    assert _effects(tmp_path, importer, layout) == expected


def test_relative_imports_in_a_package_are_known_by_their_local_names(tmp_path):
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "__init__.py").write_text("")
    (tmp_path / "pkg" / "reports.py").write_text(WRITER)
    entry = tmp_path / "pkg" / "train.py"
    entry.write_text("from .reports import report_twice as twice\nfrom . import reports\n")
    found = set(helper_effects(ast.parse(entry.read_text()), entry))
    assert {"twice", "reports.write_report"} <= found
    assert not any(name.endswith(("read_report", "write_on_rank_zero")) for name in found)


def test_readers_and_helpers_that_guard_their_own_writes_are_no_writes(tmp_path):
    found = _effects(tmp_path, "import reports\n", {"reports.py": WRITER})
    assert "reports.read_report" not in found
    assert "reports.write_on_rank_zero" not in found


def test_a_helper_the_file_defines_itself_is_its_own(tmp_path):
    importer = "from reports import *\n\n\ndef write_report(path, data):\n    return None\n"
    found = _effects(tmp_path, importer, {"reports.py": WRITER})
    assert "write_report" not in found and "report_twice" in found


PYPLOT_STAND_IN = """\
_points = []


def figure():
    _points.clear()


def plot(values):
    _points.extend(values)


def savefig(path):
    with open(path, "a") as handle:
        handle.write(repr(_points) + "\\n")


def close():
    _points.clear()
"""


@pytest.mark.slow
def test_each_helper_write_happens_once_on_two_processes(tmp_path):
    shutil.copytree(PROGRAMS / "helper_module_writes" / "out", tmp_path, dirs_exist_ok=True)
    # matplotlib is not a dependency: a stand-in whose savefig writes the figure's points
    (tmp_path / "matplotlib").mkdir()
    (tmp_path / "matplotlib" / "__init__.py").write_text("def use(backend):\n    pass\n")
    (tmp_path / "matplotlib" / "pyplot.py").write_text(PYPLOT_STAND_IN)
    launch(tmp_path / "train.py", tmp_path)
    rows = (tmp_path / "log.csv").read_text().splitlines()
    assert [row.split(",")[0] for row in rows] == ["0", "1", "2"]  # once per epoch, not twice
    assert len((tmp_path / "curve.png").read_text().splitlines()) == 1  # appended once
    assert (tmp_path / "vocab" / "vocab.txt").read_text() == "a\nb\n"
    import torch

    for name in ("last.pt", "final.pt"):
        weights = torch.load(tmp_path / name)["weights"]
        assert sorted(weights) == ["bias", "weight"], name  # no `module.` prefix


def test_a_helper_that_adds_a_log_file_handler_is_a_log_write(tmp_path):
    logging_setup = (
        "import logging\nimport logging.handlers\n\n\n"
        "def setup_logging(path):\n    logging.getLogger().addHandler(logging.FileHandler(path))\n\n\n"
        "def rotating(path):\n    handler = logging.handlers.RotatingFileHandler(path)\n"
        "    logging.getLogger('x').addHandler(logging.handlers.RotatingFileHandler(path))\n\n\n"
        "def console():\n    logging.getLogger().addHandler(logging.StreamHandler())\n"
    )
    found = _effects(tmp_path, "import logs\n", {"logs.py": logging_setup})
    assert {"logs.setup_logging", "logs.rotating"} <= found
    assert "logs.console" not in found


def test_a_helper_that_downloads_runs_on_the_main_process_first(tmp_path):
    from migrator.engine import Options, migrate_bytes

    (tmp_path / "data.py").write_text(
        "import torchvision\n\n\ndef get_dataset(root):\n"
        "    return torchvision.datasets.MNIST(root, download=True)\n"
    )
    entry = tmp_path / "train.py"
    entry.write_text(
        "import torch\nfrom torch.utils.data import DataLoader\nfrom data import get_dataset\n\n"
        "train_set = get_dataset('data')\nloader = DataLoader(train_set, batch_size=4)\n"
        "model = torch.nn.Linear(2, 1)\nopt = torch.optim.SGD(model.parameters(), lr=0.1)\n"
        "for x, y in loader:\n    opt.zero_grad()\n    model(x).sum().backward()\n    opt.step()\n"
    )
    result = migrate_bytes(entry.read_bytes(), str(entry), Options())
    assert result.migrated is not None
    assert (
        "with accelerator.main_process_first():\n    train_set = get_dataset('data')\n"
        in result.migrated.decode()
    )


LOGGER_HELPER = """\
import logging


def setup_logger(name, out_dir):
    logger = logging.getLogger(name)
    for handler in [logging.StreamHandler(), logging.FileHandler(out_dir + "/train.log")]:
        logger.addHandler(handler)
    return logger
"""


@pytest.mark.parametrize(
    "call",
    [
        "logger = setup_logger('run', '.')",  # its result kept: no statement MIG030 guards
        "log = common.setup_logger('run', '.')",
    ],
)
def test_a_project_helper_that_writes_is_refused_where_it_runs_on_every_process(tmp_path, call):
    """The check of the migrated text knows the project's helpers that write, as MIG030
    does (h10 review: a log file handler and a figure written by every process through
    helpers of a sibling module, the migration showing no finding)."""
    from migrator.engine import Options, migrate_bytes

    (tmp_path / "common.py").write_text(LOGGER_HELPER)
    entry = tmp_path / "train.py"
    entry.write_text(
        "import torch\nimport common\nfrom torch.utils.data import DataLoader, TensorDataset\n"
        "from common import setup_logger\n\n"
        f"{call}\n"
        "loader = DataLoader(TensorDataset(torch.randn(8, 2), torch.randn(8, 1)), batch_size=4)\n"
        "model = torch.nn.Linear(2, 1)\nopt = torch.optim.SGD(model.parameters(), lr=0.1)\n"
        "for x, y in loader:\n    opt.zero_grad()\n    model(x).sum().backward()\n    opt.step()\n"
    )
    result = migrate_bytes(entry.read_bytes(), str(entry), Options())
    assert result.migrated is None
    refused = [f for f in result.findings if f.code == "MIG952"]
    assert refused and "setup_logger" in refused[0].message, result.findings
