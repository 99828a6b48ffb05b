"""`migrate verify`: prove that a migration preserves training, and what a user would check.

orchestrate  the command: which runs, in which order, with which time limits
migration    the migrated program: migrated in memory, or made elsewhere (--against)
runs         one run as a subprocess (launcher, environment, working folder, hang, kill)
sandbox      each run's working folder, a mirror of the user's
launches     the migrated program as users launch it: 1 process, N without split batches

In every process of a run (imports torch):
recorder     seeds, records losses, steps, final weights; hooks: its patches
capture      what a process shows: stdout, logging, accelerator.print on every rank
writes       files and folders a process writes (audit hook, torch.save)
liveness     heartbeat, step log, stack dump on request, the rendezvous at the end

In the parent, without torch:
records      the files a run leaves, read back
compare      per-step loss, learning rate and final weights within tolerances
causes       why runs are not comparable or diverged, and how to compare anyway
numbers      the numbers of a printed line, and when two agree
outputs      the main process's output against the original's
trackers     logs and trackers read back (CSV, JSON, text, TensorBoard)
files        files written twice or no more; checkpoints: what torch.save saved, compared
shares       the samples each process drew: is the training data shared
ending       how a run ended: finished, crashed where, hung where (ranks that did not arrive)
checks       the checks beyond the per-step series, as causes and notes
judge        the verdict; verdict: the outcome; report: table, verdict line, JSON
"""
