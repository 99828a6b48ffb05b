"""Programs of several files, migrated as one unit (see docs/programs.md): the files
(`files.py`), which project modules an entry imports (`imports.py`), the joined migration
(`unit.py`), how helpers reach the accelerator (`reach.py`, `classes.py`, `text_edits.py`),
who else calls them (`outside.py`), findings put back in their files (`findings.py`) and a
run's files grouped into programs (`runs.py`)."""
