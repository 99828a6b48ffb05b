"""The prefilter stages are supersets of what the full pipeline changes or reports."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
from bulk_support import HERE, REPO, TRAIN_SCRIPT

from migrator import prefilter
from migrator.analysis.syntax.index import ModuleIndex
from migrator.engine import MigrationError, Options, migrate_bytes, migrate_text
from migrator.rules import ALL_RULES
from migrator.rules.catalogue import RULE_CODES
from migrator.source import Source

ALL = frozenset(RULE_CODES)

# Shapes around the gate's conditions: each is run through the gate and the whole pipeline.
GATE_CASES = {
    "no_backward": "import torch\nx = torch.ones(2)\n",
    "def_backward_only": (
        "import torch\n\nclass Square(torch.autograd.Function):\n"
        "    @staticmethod\n    def backward(ctx, grad):\n        return 2 * grad\n"
    ),
    "backward_in_string": 's = "call loss.backward() in a loop"\n',
    "backward_module_level": "loss = model(x).sum()\nloss.backward()\n",
    "backward_in_called_helper": (
        "def step(loss, opt):\n    loss.backward()\n    opt.step()\n\n"
        "for batch in loader:\n    step(model(batch), opt)\n"
    ),
    "backward_in_uncalled_method": (
        "class Trainer:\n    def fit(self, loss):\n        loss.backward()\n"
    ),
    "backward_in_called_function_no_loop": (
        "def helper(loss):\n    loss.backward()\n\nhelper(l)\n"
    ),
    "loop_without_step": (
        "def helper(loss):\n    loss.backward()\n\nfor x in data:\n    helper(x)\n"
    ),
    "loop_with_step_via_helper": (
        "def helper(loss):\n    loss.backward()\n\n"
        "def train(loader, opt):\n    for x in loader:\n        helper(x)\n        opt.step()\n\n"
        "train(loader, opt)\n"
    ),
    "autograd_backward": "import torch\ntorch.autograd.backward([t])\n",
    "py312_syntax": "def f[T](x: T) -> T:\n    x.backward()\n    return x\n",
    "training_script": TRAIN_SCRIPT,
}


def _python_sources() -> list[Path]:
    roots = [REPO / "fixtures", HERE / "data"]
    return sorted(p for root in roots if root.is_dir() for p in root.rglob("*.py"))


def _gate(text: str, present) -> bool:
    """The ast gate's verdict (True: analyse); an unparsable file goes to the pipeline, which
    reports it."""
    try:
        tree = ast.parse(text)
    except SyntaxError:
        return True
    return prefilter.gate(ModuleIndex(tree, Source(text)), frozenset(present))


def _gate_rejects(text: str) -> bool:
    data = text.encode()
    present = prefilter.matched_triggers(data, ALL)
    if present is None:
        return True
    if not prefilter.needs_syntax_gate(present):
        return False
    return not prefilter.could_step(data, present) or not _gate(text, present)


def _assert_superset(text: str) -> None:
    if not _gate_rejects(text):
        return
    try:
        output, findings = migrate_text(text, Options())
    except MigrationError:  # unparsable input: nothing for either stage to act on
        return
    assert output is None and findings == [], "the gate rejected a file the pipeline acts on"


@pytest.mark.parametrize("name", sorted(GATE_CASES))
def test_gate_rejection_implies_no_change_and_no_findings(name):
    _assert_superset(GATE_CASES[name])


@pytest.mark.parametrize("path", _python_sources(), ids=lambda p: str(p.relative_to(REPO)))
def test_gate_is_a_superset_on_every_fixture(path):
    _assert_superset(path.read_text(encoding="utf-8", errors="replace"))


def test_gate_lets_a_training_script_through():
    assert not _gate_rejects(TRAIN_SCRIPT)


def test_gate_rejects_files_that_only_define_backward():
    assert _gate_rejects(GATE_CASES["def_backward_only"])
    assert _gate_rejects(GATE_CASES["loop_without_step"])


def test_gate_keeps_files_whose_backward_could_be_reported():
    for name in ("backward_module_level", "backward_in_uncalled_method", "py312_syntax"):
        stepping = GATE_CASES[name] + "\noptimizer.step()\n"  # MIG905 needs an optimizer step
        assert not _gate_rejects(stepping), name
        if name != "py312_syntax":  # Python 3.11's ast cannot read it: the pipeline reports it
            assert _gate_rejects(GATE_CASES[name]), name


@pytest.mark.parametrize(
    "source",
    [
        b"loss.backward()",
        b"loss . backward()",
        b"(loss.\n    backward)()",
        b"loss.\\\nbackward()",
        b"(loss.  # why\n   backward)()",
        b"x = (loss.\r\n  backward())",
        b"(loss.backward)()",
        b"loss.backward  # a comment inside brackets\n(retain_graph=True)",
        b"@opt.backward\\\n(1)\ndef f(): pass",
        b"x = 1  # a comment after code does not hide the call\nloss.backward()",
        b"x = (loss.\n     # a comment line that ends with a dot.\n     backward)()",
    ],
)
def test_byte_stage_finds_every_spelling_of_a_backward_attribute(source):
    assert prefilter.could_need_migration(source, ALL)
    present = prefilter.matched_triggers(source, ALL)
    assert prefilter.could_step(source + b"\nopt.step()\n", present)
    assert prefilter.could_step(b"opt.\\\n  step (1)\n" + source, present)


@pytest.mark.parametrize(
    "source",
    [
        b"def backward(ctx, g):\n    return g",
        b"register_backward_hook(h)",
        b"see :meth:`torch.Tensor.backward` for details",
        b"x = 1\n    # then call loss.backward() once per batch\n",
        b'def f():\n    """Example:\n\n    >>> out.sum().backward()\n    """\n',
        b"step = loss.backward\n",  # a reference, not a call
        b"x = 1",
        b"",
    ],
)
def test_byte_stage_rejects_backward_that_is_not_a_method_call(source):
    assert not prefilter.could_need_migration(source, ALL)


def test_byte_stage_is_linear_on_hostile_input():
    # Many dots followed by long comment-like runs: a backtracking pattern would take minutes.
    hostile = (b".#" + b"#" * 200 + b"\n") * 20000
    assert not prefilter.could_need_migration(hostile, ALL)


def test_every_rule_trigger_reaches_the_prefilter():
    declared = {t.encode() for rule in ALL_RULES for t in rule.triggers}
    assert declared == set(prefilter.triggers(ALL))


def test_unselected_rules_do_not_contribute_triggers():
    assert prefilter.triggers(frozenset()) == ()
    assert not prefilter.could_need_migration(TRAIN_SCRIPT.encode(), frozenset())


def test_a_trigger_other_than_backward_bypasses_the_ast_stage():
    assert prefilter.needs_syntax_gate({"backward"})
    assert prefilter.needs_syntax_gate({"backward", "DataLoader"})
    assert not prefilter.needs_syntax_gate({"backward", "DistributedDataParallel"})


def test_the_hidden_step_gate_knows_every_loader_class():
    from migrator.analysis.catalogue.patterns import LOADER_CLASSES

    assert all(name.endswith(prefilter.LOADER_SUFFIX) for name in LOADER_CLASSES)
    assert prefilter.HIDDEN_STEP_TRIGGER.encode() in {
        t for r in ALL_RULES if r.code == "MIG910" for t in (x.encode() for x in r.triggers)
    }


HIDDEN_STEP_CASES = {
    # (text, the ast stage must hand it to the analysis)
    "loader_and_imported_helper": (
        (
            "from torch.utils.data import DataLoader as DL\nfrom engine import fit\n"
            "fit(model, DL(ds), opt)\n"
        ),
        True,
    ),
    "relative_import": (
        (
            "from torch.utils.data import DataLoader\nfrom .engine import fit\n"
            "fit(model, DataLoader(ds), opt)\n"
        ),
        True,
    ),
    "only_torch_calls": (
        (
            "import torch\nfrom torch.utils.data import DataLoader\n"
            "loader = DataLoader(torch.utils.data.TensorDataset(torch.randn(4)))\n"
        ),
        False,
    ),
    "loader_named_in_a_string": ("import os\nprint(os.getcwd(), 'DataLoader')\n", False),
}


@pytest.mark.parametrize("name", sorted(HIDDEN_STEP_CASES))
def test_the_ast_stage_passes_possible_hidden_steps_to_the_analysis(name):
    text, expected = HIDDEN_STEP_CASES[name]
    present = prefilter.matched_triggers(text.encode(), ALL)
    assert present == {"DataLoader"}
    assert _gate(text, present) is expected
    if not expected:
        assert _assert_skip_means_nothing(text)


def test_migrate_bytes_marks_gated_files_skipped():
    result = migrate_bytes(GATE_CASES["def_backward_only"].encode(), "f.py")
    assert result.skipped and result.migrated is None and result.error is None
    result = migrate_bytes(TRAIN_SCRIPT.encode(), "train.py")
    assert not result.skipped and result.changed


def _torch_files_the_gate_rejects(limit: int = 20) -> list[Path]:
    torch = pytest.importorskip("torch")  # only its sources are read, nothing is run
    root = Path(torch.__file__).parent
    chosen = []
    for path in sorted(root.rglob("*.py")):
        data = path.read_bytes()
        if b"backward" not in data or len(data) > 60_000:
            continue
        text = data.decode("utf-8", errors="replace")
        if _gate_rejects(text) and prefilter.matched_triggers(data, ALL) is not None:
            chosen.append(path)  # passed the byte stage, rejected by the ast stage
        if len(chosen) >= limit:
            break
    return chosen


def test_gate_is_a_superset_on_real_code_that_mentions_backward():
    files = _torch_files_the_gate_rejects()
    assert files, "expected torch sources that the ast stage rejects"
    for path in files:
        _assert_superset(path.read_text(encoding="utf-8", errors="replace"))


SKIP_CASES = {
    "module_level": "loss = model(x).sum()\nloss.backward()\n",
    "uncalled_method": "class T:\n    def fit(self, loss):\n        self.loss(loss).backward()\n",
    "gradient_check": "x = torch.randn(3, requires_grad=True)\n(x ** 2).sum().backward()\n",
    "step_only_in_a_string": "loss.backward()\nlog('optimizer.step()')\n",
    "autograd_receivers": (
        "import torch\nimport torch.autograd as ag\ntorch.autograd.backward(t)\nag.backward(t)\n"
    ),
}


def _assert_skip_means_nothing(text: str) -> bool:
    """True if a cheap stage (bytes or the ast gate) decided the file needs nothing; then the
    whole pipeline agrees: no change, no finding."""
    if not _gate_rejects(text):
        return False
    try:
        output, findings = migrate_text(text, Options())
    except MigrationError:
        return True  # unparsable: nothing for any stage to act on
    assert output is None
    assert findings == []
    return True


NOTES_CASES = {
    # (text, the codes the analysis reports): MIG905 is possible, so no cheap stage may skip
    "module_level": ("loss = model(x).sum()\nloss.backward()\noptimizer.step()\n", ["MIG905"]),
    "step_through_a_helper": (
        (
            "def apply(opt):\n    opt.step()\n\ndef train(loss, opt):\n    loss.backward()\n"
            "    apply(opt)\n"
        ),
        ["MIG905"],
    ),
    # one step, called once outside any loop: never silent (issue 10), the note says so
    "function_called_once_outside_a_loop": (
        "def train(loss, opt):\n    loss.backward()\n    opt.step()\n\ntrain(l, o)\n",
        ["MIG905"],
    ),
    "function_called_in_a_loop_gets_no_note": (
        (
            "def train(loss, opt):\n    loss.backward()\n    opt.step()\n\nfor l in ls:\n"
            "    train(l, o)\n"
        ),
        ["MIG900", "MIG950"],  # refused, and said once to be left as it is
    ),
    "tabs_and_crlf": (
        "def f(loss, o):\r\n\tif loss:\r\n\t\tloss.backward()\r\n\t\to.step()\r\n",
        ["MIG905"],
    ),
    "autograd_receiver": ("import torch.autograd as ag\nag.backward(t)\nopt.step()\n", []),
}


@pytest.mark.parametrize("name", sorted(NOTES_CASES))
def test_files_where_a_note_is_possible_reach_the_analysis(name):
    text, codes = NOTES_CASES[name]
    assert not _gate_rejects(text)
    result = migrate_bytes(text.encode(), "notes.py")
    assert not result.skipped and result.migrated is None
    assert [f.code for f in result.findings] == codes


def test_a_backward_in_a_method_goes_to_the_analysis():
    text = "class T:\n    def fit(self, loss):\n        loss.backward()\n        self.opt.step()\n"
    assert not _gate_rejects(text)


@pytest.mark.parametrize("name", sorted(SKIP_CASES))
def test_files_without_an_optimizer_step_are_skipped_and_the_analysis_agrees(name):
    assert _assert_skip_means_nothing(SKIP_CASES[name])


@pytest.mark.parametrize("name", sorted(GATE_CASES))
def test_skip_verdict_on_gate_cases_equals_the_pipeline(name):
    _assert_skip_means_nothing(GATE_CASES[name])


@pytest.mark.parametrize("path", _python_sources(), ids=lambda p: str(p.relative_to(REPO)))
def test_skip_verdict_on_every_fixture_equals_the_pipeline(path):
    _assert_skip_means_nothing(path.read_text(encoding="utf-8", errors="replace"))


def test_skip_verdict_on_real_code_equals_the_pipeline():
    torch = pytest.importorskip("torch")
    checked = gated = 0
    for path in sorted(Path(torch.__file__).parent.rglob("*.py")):
        data = path.read_bytes()
        if b".backward(" not in data or len(data) > 80_000:
            continue
        text = data.decode("utf-8", errors="replace")
        skipped = _assert_skip_means_nothing(text)
        checked += skipped
        gated += skipped and prefilter.matched_triggers(data, ALL) is not None
    assert checked >= 3 and gated >= 3  # real files mention backward yet are skipped, some
    # by the byte stage (no optimizer step), some by the ast gate


def test_a_backward_without_any_step_is_rejected_once_parsed():
    backward = {"backward"}
    assert not prefilter.could_step(b"loss.backward()\n", backward)
    assert not prefilter.could_step(b"loss.backward()\n# opt.step()\n", backward)
    assert prefilter.could_step(b"loss.backward()\nopt.step()\n", backward)
    assert prefilter.could_step(b"loss.backward()\n", {"backward", "DataLoader"})
    result = migrate_bytes(b"for x in loader\n    loss.backward()\n", "broken.py")
    assert result.error is not None and result.error.startswith("cannot parse")


def test_files_that_could_train_or_note_go_to_the_analysis():
    for text in (
        "for b in loader:\n    loss.backward()\n    opt.step()\n",  # could train
        "class T:\n    def f(self):\n        loss.backward()\n        opt.step()\n",  # a method
    ):
        assert not _gate_rejects(text), text
