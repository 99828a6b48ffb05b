"""The program model: where the object a name holds is made (`origins.py`), which function a
call runs (`calls.py`), objects held on others (`chains.py`, `instances.py`), what a loop
draws its batches from (`loop_sources.py`) and where loader data flows (`dataflow.py`)."""
