"""What a program does on N processes: which code runs on every process and which on the
main one only (`processes.py`), and what each value counts there (`values.py`)."""
