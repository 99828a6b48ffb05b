"""Fixtures for the bulk tests."""

from __future__ import annotations

from pathlib import Path

import pytest
from bulk_support import TRAIN_SCRIPT


@pytest.fixture
def train_script() -> str:
    return TRAIN_SCRIPT


@pytest.fixture
def tree(tmp_path: Path):
    """Write {relative path: text or bytes} under tmp_path; returns tmp_path."""

    def make(files: dict[str, str | bytes]) -> Path:
        for name, content in files.items():
            path = tmp_path / name
            path.parent.mkdir(parents=True, exist_ok=True)
            if isinstance(content, bytes):
                path.write_bytes(content)
            else:
                path.write_text(content)
        return tmp_path

    return make
