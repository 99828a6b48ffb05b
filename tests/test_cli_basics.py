import subprocess
import sys


def test_version_flag_prints_version_and_exits_zero():
    done = subprocess.run(
        [sys.executable, "-m", "migrator", "--version"], capture_output=True, text=True, check=False
    )
    assert done.returncode == 0
    assert done.stdout.startswith("migrate ")
