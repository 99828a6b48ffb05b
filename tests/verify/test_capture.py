"""What the recorder captures of what a process shows."""

from __future__ import annotations

import io
import json
import logging
import sys

from migrator.verify.capture import LineStream, TeeStdout, _shown, after_import


def read(path):
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_stdout_passes_through_and_each_line_is_recorded_with_its_step(tmp_path):
    step = [0]
    lines = LineStream(tmp_path / "out.jsonl", lambda: step[0])
    real = io.StringIO()
    tee = TeeStdout(real, lines)
    tee.write("epoch 0: loss 0.5\nprogress 10%\rprogress 20%")
    step[0] = 4
    print("epoch 1: loss 0.4", file=tee)
    tee.write("no newline at the end")
    tee.finish()
    lines.close()
    assert real.getvalue().startswith("epoch 0: loss 0.5\nprogress 10%\r")
    assert read(tmp_path / "out.jsonl") == [
        {"step": 0, "text": "epoch 0: loss 0.5"},
        {"step": 0, "text": "progress 10%"},
        {"step": 4, "text": "progress 20%epoch 1: loss 0.4"},
        {"step": 4, "text": "no newline at the end"},
    ]


def test_a_log_record_counts_when_a_handler_shows_it():
    logger = logging.getLogger("verify-test-shown")
    logger.propagate = False
    record = logger.makeRecord(logger.name, logging.INFO, __file__, 1, "msg", (), None)
    assert not _shown(logger, record)  # no handler: logging's last resort shows WARNING+
    warning = logger.makeRecord(logger.name, logging.WARNING, __file__, 1, "msg", (), None)
    assert _shown(logger, warning)
    handler = logging.NullHandler()
    handler.setLevel(logging.ERROR)
    logger.addHandler(handler)
    assert not _shown(logger, warning)  # the handler there takes ERROR and up
    handler.setLevel(logging.INFO)
    assert _shown(logger, record)
    logger.removeHandler(handler)


def test_a_module_is_patched_when_it_is_imported(tmp_path, monkeypatch):
    (tmp_path / "verify_late_module.py").write_text("VALUE = 1\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    seen = []
    finders = list(sys.meta_path)
    try:
        after_import(("verify_late_module",), lambda module: seen.append(module.VALUE))
        import verify_late_module  # noqa: F401

        assert seen == [1]
    finally:
        sys.meta_path[:] = finders
        sys.modules.pop("verify_late_module", None)
