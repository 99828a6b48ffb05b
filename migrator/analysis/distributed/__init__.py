"""Native torch.distributed code (process groups, DDP wrappers, samplers, ranks, spawned
workers) read for MIG010 (`reader.py` builds `facts.DistributedFacts`)."""
