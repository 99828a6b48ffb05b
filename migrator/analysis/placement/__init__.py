"""Where the one `accelerator.prepare(...)` goes (`plan.py`), read from definitions and uses
(`reading.py`), in the branches of an `if` (`branches.py`) and in other scopes that make
objects (`homes.py`)."""
