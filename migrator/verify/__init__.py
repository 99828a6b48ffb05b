"""`migrate verify`: prove that a migration preserves training.

orchestrate  migrate in memory, run both scripts, compare, decide the verdict
runs         one run as a subprocess (launcher command, environment, time limit, kill)
recorder     runs inside every process of both runs (imports torch); hooks: its patches
records      the files a run leaves, read back without torch
compare      per-step loss, learning rate and final weights within tolerances
causes       why runs are not comparable or diverged, and how to compare anyway
verdict      the outcome and its exit code; report: table, verdict line, JSON
"""
