import pytest


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
