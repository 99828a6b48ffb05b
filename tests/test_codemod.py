"""The LibCST face of the migration (migrator/codemod.py): LibCST's own CodemodTest on the golden
fixtures, composition with other codemods, and `python -m libcst.tool codemod` against
`migrate` on a training script."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import libcst as cst
import pytest
from libcst.codemod import CodemodContext, CodemodTest, ContextAwareTransformer, SkipFile
from libcst.codemod.visitors import AddImportsVisitor
from libcst.testing.utils import data_provider

from migrator.codemod import MigrateToAccelerate, findings_of
from migrator.engine import Options, migrate_bytes, migrate_text
from tests.fixtures import GOLDEN, ROOT, expected_codes, golden_inputs, noop_inputs, output_path

GOLDEN_CASES = {path.name[: -len(".in.py")]: {"path": path} for path in golden_inputs()}
NOOP_CASES = {path.stem: {"path": path} for path in noop_inputs()}
TRAINING = (GOLDEN / "seed002_mnist_plain.in.py").read_text()

# Written for these tests: a regression model trained the single-device way, with a scheduler
# stepped once per epoch (a note from MIG006) and a checkpoint.
FRESH_SCRIPT = '''\
"""Fit a small regression network to noisy samples of a sine wave."""

import math

import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


def make_data(count):
    xs = torch.linspace(-math.pi, math.pi, count).unsqueeze(1)
    return TensorDataset(xs, torch.sin(xs) + 0.05 * torch.randn_like(xs))


def main():
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    model = nn.Sequential(nn.Linear(1, 32), nn.Tanh(), nn.Linear(32, 1)).to(device)
    optimizer = torch.optim.Adam(model.parameters(), lr=3e-3)
    train_loader = DataLoader(make_data(512), batch_size=32, shuffle=True)
    scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=1, gamma=0.5)
    for epoch in range(3):
        model.train()
        for xs, ys in train_loader:
            xs, ys = xs.to(device), ys.to(device)
            optimizer.zero_grad()
            loss = nn.functional.mse_loss(model(xs), ys)
            loss.backward()
            optimizer.step()
        scheduler.step()
        print(f"epoch {epoch}: loss {loss.item():.4f}")
    torch.save(model.state_dict(), "sine.pt")


if __name__ == "__main__":
    main()
'''


class GoldenFixtures(CodemodTest):
    TRANSFORM = MigrateToAccelerate

    @data_provider(GOLDEN_CASES, test_limit=10_000)
    def test_golden_fixture(self, path) -> None:
        source = path.read_text()
        context = CodemodContext()
        self.assertCodemod(source, output_path(path).read_text(), context_override=context)
        codes = sorted(warning.split(": ", 2)[1].split()[0] for warning in context.warnings)
        self.assertEqual(codes, expected_codes(source))

    @data_provider(NOOP_CASES, test_limit=10_000)
    def test_noop_fixture(self, path) -> None:
        source = path.read_text()
        self.assertCodemod(source, source)
        module = cst.parse_module(source)
        codemod = MigrateToAccelerate(CodemodContext())
        self.assertIs(codemod.migrate(module), module)  # not re-parsed
        self.assertTrue(codemod.transform_module(module).deep_equals(module))

    def test_target_accelerate(self) -> None:
        expected, _ = migrate_text(TRAINING, Options(target="accelerate"))
        self.assertIn("from accelerate import Accelerator", expected)
        self.assertCodemod(TRAINING, expected, target="accelerate")

    def test_ignored_rules_are_not_applied(self) -> None:
        rules = frozenset(Options().rules) - {"MIG030"}
        expected, _ = migrate_text(TRAINING, Options(rules=rules))
        self.assertNotEqual(expected, migrate_text(TRAINING)[0])
        self.assertCodemod(TRAINING, expected, ignore="MIG030")

    def test_code_pythons_parser_refuses_is_skipped_with_migrates_reason(self) -> None:
        nested = "(" * 250 + "1" + ")" * 250  # CPython's tokenizer stops at 200, LibCST's not
        source = f"x = {nested}\nloss.backward()\noptimizer.step()\n"
        reason = migrate_bytes(source.encode(), "x.py", Options()).error
        self.assertIn("too many nested parentheses", reason)
        with self.assertRaisesRegex(SkipFile, "too many nested parentheses"):
            MigrateToAccelerate(CodemodContext()).transform_module(cst.parse_module(source))


def test_findings_are_the_warnings_migrate_prints(tmp_path):
    path = tmp_path / "train.py"
    path.write_text(FRESH_SCRIPT)
    context = CodemodContext(filename=str(path))
    MigrateToAccelerate(context).transform_module(cst.parse_module(FRESH_SCRIPT))
    result = migrate_bytes(FRESH_SCRIPT.encode(), str(path), Options())
    assert result.findings, "the script needs a finding for this test to mean anything"
    assert context.warnings == [finding.render(str(path)) for finding in result.findings]
    assert [f.code for f in findings_of(context)] == [f.code for f in result.findings]


def test_options_not_given_come_from_the_projects_configuration(tmp_path):
    (tmp_path / "pyproject.toml").write_text('[tool.migrate]\ntarget = "accelerate"\n')
    context = CodemodContext(filename=str(tmp_path / "train.py"))
    configured = MigrateToAccelerate(context).transform_module(cst.parse_module(FRESH_SCRIPT))
    assert configured.code == migrate_text(FRESH_SCRIPT, Options(target="accelerate"))[0]
    given = MigrateToAccelerate(context, target="runtime")
    assert (
        given.transform_module(cst.parse_module(FRESH_SCRIPT)).code == migrate_text(FRESH_SCRIPT)[0]
    )


def test_a_bad_rule_code_is_refused_when_the_codemod_is_made():
    with pytest.raises(ValueError, match="MIG999"):
        MigrateToAccelerate(CodemodContext(), select="MIG999")
    with pytest.raises(ValueError, match="target"):
        MigrateToAccelerate(CodemodContext(), target="cuda")


class RenameLoader(ContextAwareTransformer):
    """Another team's codemod: `train_loader` becomes `loader_train`."""

    def leave_Name(self, original_node: cst.Name, updated_node: cst.Name) -> cst.Name:
        if updated_node.value == "train_loader":
            return updated_node.with_changes(value="loader_train")
        return updated_node


def test_composes_after_another_codemod():
    context = CodemodContext()
    renamed = RenameLoader(context).transform_module(cst.parse_module(FRESH_SCRIPT))
    migrated = MigrateToAccelerate(context).transform_module(renamed)
    expected, _ = migrate_text(FRESH_SCRIPT.replace("train_loader", "loader_train"))
    assert migrated.code == expected
    assert "accelerator.prepare(" in expected and "loader_train" in expected


def test_composes_before_another_codemod():
    context = CodemodContext()
    migrated = MigrateToAccelerate(context).transform_module(cst.parse_module(FRESH_SCRIPT))
    AddImportsVisitor.add_needed_import(context, "os")
    with_import = AddImportsVisitor(context).transform_module(migrated)
    assert with_import.code.count("import os\n") == 1
    assert with_import.code.replace("import os\n", "", 1) == migrated.code


def test_as_a_visitor_it_migrates_the_module_it_leaves():
    module = cst.parse_module(FRESH_SCRIPT)
    visited = module.visit(MigrateToAccelerate(CodemodContext()))
    assert visited.code == migrate_text(FRESH_SCRIPT)[0]


def _env() -> dict[str, str]:
    """This checkout's migrator in the subprocess, whatever its working directory."""
    paths = [str(ROOT), *filter(None, os.environ.get("PYTHONPATH", "").split(os.pathsep))]
    return {**os.environ, "PYTHONPATH": os.pathsep.join(paths)}


def _libcst_tool(*args: str, cwd):
    return subprocess.run(
        [sys.executable, "-m", "libcst.tool", "codemod", *args],
        cwd=cwd,
        env=_env(),
        capture_output=True,
        text=True,
        check=False,
    )


def _migrate(*args: str, cwd):
    return subprocess.run(
        [sys.executable, "-m", "migrator", *args],
        cwd=cwd,
        env=_env(),
        capture_output=True,
        text=True,
        check=False,
    )


@pytest.mark.parametrize("options", [[], ["--target", "accelerate"]], ids=["default", "accelerate"])
def test_libcst_tool_writes_what_migrate_writes(tmp_path, options):
    (tmp_path / "by_libcst").mkdir()
    (tmp_path / "by_migrate").mkdir()
    for folder in ("by_libcst", "by_migrate"):
        (tmp_path / folder / "train.py").write_text(FRESH_SCRIPT)
    done = _libcst_tool(
        "-x",
        "migrator.codemod.MigrateToAccelerate",
        *options,
        "train.py",
        cwd=tmp_path / "by_libcst",
    )
    assert done.returncode == 0, done.stderr
    assert "Failed to codemod 0 files" in done.stderr
    written = _migrate("--write", *options, "train.py", cwd=tmp_path / "by_migrate")
    assert written.returncode in (0, 1), written.stderr
    migrated = (tmp_path / "by_migrate" / "train.py").read_text()
    assert migrated != FRESH_SCRIPT
    assert (tmp_path / "by_libcst" / "train.py").read_text() == migrated
    findings = [line for line in written.stderr.splitlines() if line.startswith("train.py:")]
    assert findings, "the script needs a finding for this test to mean anything"
    for line in findings:  # each finding migrate printed is a warning, path and all
        assert f"WARNING: {tmp_path / 'by_libcst' / line}" in done.stderr


def test_libcst_tool_finds_it_through_the_configured_modules(tmp_path):
    (tmp_path / ".libcst.codemod.yaml").write_text("modules:\n  - 'migrator'\n")
    (tmp_path / "train.py").write_text(FRESH_SCRIPT)
    done = _libcst_tool("codemod.MigrateToAccelerate", "train.py", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "train.py").read_text() == migrate_text(FRESH_SCRIPT)[0]


def test_libcst_tool_refuses_an_unknown_rule_code(tmp_path):
    (tmp_path / "train.py").write_text(FRESH_SCRIPT)
    done = _libcst_tool(
        "-x", "migrator.codemod.MigrateToAccelerate", "--select", "MIG999", "train.py", cwd=tmp_path
    )
    assert done.returncode == 2
    assert "unknown rule code or prefix 'MIG999'" in done.stderr
    assert (tmp_path / "train.py").read_text() == FRESH_SCRIPT


def test_migrate_never_imports_libcst(tmp_path):
    (tmp_path / "train.py").write_text(FRESH_SCRIPT)
    code = textwrap.dedent(
        """
        import sys
        import migrator, migrator.engine, migrator.app
        from migrator.cli import main
        sys.argv = ["migrate", "--check", "--no-cache", "train.py"]
        try:
            main()
        except SystemExit as done:
            print(done.code, "libcst" in sys.modules)
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", code],
        cwd=tmp_path,
        env=_env(),
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.stdout.split() == ["1", "False"], done.stderr
