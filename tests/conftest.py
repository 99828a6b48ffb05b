import os
import shutil
import tempfile

import pytest

_CACHE_DIR = None


def pytest_configure(config):
    """Every `migrate` the tests run caches its verdicts here, never in the repository."""
    global _CACHE_DIR
    if "MIGRATE_CACHE_DIR" not in os.environ:
        _CACHE_DIR = tempfile.mkdtemp(prefix="migrate-test-cache-")
        os.environ["MIGRATE_CACHE_DIR"] = _CACHE_DIR


def pytest_unconfigure(config):
    if _CACHE_DIR is not None:
        shutil.rmtree(_CACHE_DIR, ignore_errors=True)
        os.environ.pop("MIGRATE_CACHE_DIR", None)


def pytest_addoption(parser):
    parser.addoption(
        "--update-golden",
        action="store_true",
        default=False,
        help="rewrite fixtures/golden/*.out.py from the current output (read the diff after!)",
    )


@pytest.fixture
def update_golden(request):
    return request.config.getoption("--update-golden")
