"""The DistributedSampler shapes of research programs (DETR, MAE) that MIG010 folds into the
loader: a BatchSampler feeding `batch_sampler=`, `num_replicas=`/`rank=` from the process group
or the script's helpers, and a print of the sampler; and the options and uses it must refuse,
naming the line. The whole-script output is fixtures/golden/ddp_research_batch_sampler.*."""

from __future__ import annotations

from tests.test_mig010 import HEADER, codes, migrate, script

PROGRAM = """\
def train(args):
    dist.init_process_group("gloo")
    data = TensorDataset(torch.randn(64, 4), torch.randn(64, 1))
    if args.distributed:
        sampler = DistributedSampler(data{options})
        {extra}
    else:
        sampler = torch.utils.data.{fallback}(data)
    batches = torch.utils.data.BatchSampler(sampler, args.batch_size, drop_last=True)
    loader = DataLoader(data, batch_sampler=batches, num_workers=2)
    {after}
    model = DDP(torch.nn.Linear(4, 1))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for epoch in range(2):
        if args.distributed:
            sampler.set_epoch(epoch)
        for x, y in loader:
            loss = (model(x) - y).pow(2).mean()
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
"""


def program(options="", extra="pass", fallback="RandomSampler", after="pass", header=HEADER):
    return script(PROGRAM.format(options=options, extra=extra, fallback=fallback, after=after),
                  header)  # fmt: skip


def line_of(source: str, text: str) -> int:
    return next(i for i, line in enumerate(source.splitlines(), 1) if text in line)


def test_batch_sampler_becomes_the_loaders_batch_size_shuffle_and_drop_last():
    output, findings = migrate(program())
    assert not findings, findings
    expected = ("    loader = DataLoader(data, batch_size=args.batch_size, shuffle=True, "
                "drop_last=True, num_workers=2)\n")  # fmt: skip
    assert expected in output
    assert "Sampler" not in output and "set_epoch" not in output and "batches" not in output


def test_batch_sampler_over_an_unshuffled_sampler_keeps_the_order():
    output, findings = migrate(program(", shuffle=False", fallback="SequentialSampler"))
    assert not findings, findings
    assert "batch_size=args.batch_size, shuffle=False, drop_last=True, num_workers=2)" in output


def test_batch_sampler_used_beyond_the_loader_is_refused_naming_its_line():
    source = program(after="print(len(batches))")
    output, findings = migrate(source)
    assert output is None and codes(findings) == ["MIG907", "MIG950"]
    line = line_of(source, "BatchSampler(sampler")
    assert f"`sampler` is handed to the BatchSampler at line {line}" in findings[0].message
    assert "`batches` is used beyond one DataLoader's `batch_sampler=`" in findings[0].message


def test_batch_sampler_with_a_batch_size_rebound_later_is_refused():
    source = program().replace("args.batch_size, drop_last", "size, drop_last").replace(
        "    if args.distributed:\n        sampler", "    size = 8\n    if args.distributed:\n"
        "        sampler").replace("    model = DDP", "    size = 16\n    model = DDP")  # fmt: skip
    output, findings = migrate(source)
    assert output is None and codes(findings) == ["MIG907", "MIG950"]
    assert "not bound to one name with a plain batch size" in findings[0].message


def test_replicas_and_rank_from_the_process_group_or_helpers_go_with_the_sampler():
    helpers = HEADER + "import misc\n"
    for options, extra in (
        (", num_replicas=dist.get_world_size(), rank=dist.get_rank()", "pass"),
        (", num_replicas=tasks, rank=global_rank, shuffle=True",
         'print("Sampler_train = %s" % str(sampler))'),
    ):  # fmt: skip
        source = program(options, extra, header=helpers).replace(
            "    if args.distributed:\n        sampler",
            "    tasks = misc.get_world_size()\n    global_rank = misc.get_rank()\n"
            "    if args.distributed:\n        sampler", 1)  # fmt: skip
        output, findings = migrate(source)
        assert not findings, (options, findings)
        assert "DistributedSampler" not in output and "print(" not in output
        assert "get_world_size()" not in output.replace("misc.get_world_size()", "")


def test_rank_name_read_only_by_the_sampler_goes_with_it():
    source = program(", num_replicas=tasks, rank=rank").replace(
        "    if args.distributed:\n        sampler",
        "    tasks = dist.get_world_size()\n    rank = dist.get_rank()\n"
        "    if args.distributed:\n        sampler", 1)  # fmt: skip
    output, findings = migrate(source)
    assert not findings, findings
    assert "dist." not in output and "tasks" not in output and "rank =" not in output


def test_sampler_options_the_loader_cannot_reproduce_are_refused_by_name():
    for options, expected in (
        (", num_replicas=1, rank=0", "passes `num_replicas=` at line {line}, not the world size"),
        (", rank=args.node", "passes `rank=` at line {line}, not this process's rank"),
        (", drop_last=True", "passes `drop_last=` at line {line} where its loader keeps its "),
        (", **options", "passes `**` arguments at line {line}"),
    ):
        source = program(options).replace("size, drop_last=True)", "size, drop_last=False)")
        output, findings = migrate(source)
        assert output is None and codes(findings) == ["MIG907", "MIG950"], (options, findings)
        line = line_of(source, "sampler = DistributedSampler(")
        assert expected.format(line=line) in findings[0].message, findings[0].message


def test_sampler_seed_and_drop_last_false_are_accepted():
    output, findings = migrate(program(", shuffle=True, seed=args.seed, drop_last=False"))
    assert not findings, findings
    assert "shuffle=True, drop_last=True, num_workers=2)" in output


def test_sampler_drop_last_where_every_loader_drops_its_last_batch_too_is_accepted():
    """Dropped on both, each process takes ⌊n/(N·b)⌋ batches an epoch, natively and prepared
    (the Accelerator deals the ⌊n/b⌋ whole batches round the processes)."""
    output, findings = migrate(program(", drop_last=True"))
    assert not findings, findings
    assert "batch_size=args.batch_size, shuffle=True, drop_last=True, num_workers=2)" in output
    plain = program(", drop_last=True").replace(
        "    batches = torch.utils.data.BatchSampler(sampler, args.batch_size, drop_last=True)\n"
        "    loader = DataLoader(data, batch_sampler=batches, num_workers=2)",
        "    loader = DataLoader(data, {batch}sampler=sampler, drop_last={drop})",
    )
    output, findings = migrate(plain.format(batch="batch_size=8, ", drop="True"))
    assert not findings, findings
    assert "DataLoader(data, batch_size=8, shuffle=True, drop_last=True)" in output
    source = plain.format(batch="", drop="False")
    output, findings = migrate(source)
    assert output is None and codes(findings) == ["MIG907", "MIG950"], findings
    line = line_of(source, "sampler = DistributedSampler(")
    assert f"`drop_last=` at line {line} where its loader keeps" in findings[0].message


def test_print_of_a_value_computed_from_the_sampler_is_refused():
    source = program(extra="print(len(sampler))")
    output, findings = migrate(source)
    assert output is None and codes(findings) == ["MIG907", "MIG950"]
    assert f"`sampler` is used at line {line_of(source, 'print(len(')}" in findings[0].message


def test_fstring_print_of_the_sampler_goes_with_it():
    output, findings = migrate(program(extra='print(f"sampler {sampler!r}", flush=True)'))
    assert not findings, findings
    assert "print(" not in output


def test_replicas_and_rank_as_the_process_group_was_told_them_go_with_the_sampler():
    """The same expression as init_process_group's `world_size=`, a name handed to the
    function that tells the process group, a dict literal spread with `**`, and names
    unpacked from a helper returning the process group's rank and size."""
    told = script("""\
        def setup(rank, world_size):
            dist.init_process_group("gloo", rank=rank, world_size=world_size)


        def train(rank, world_size):
            setup(rank, world_size)
            data = TensorDataset(torch.randn(64, 4), torch.randn(64, 1))
            options = {"num_replicas": world_size, "rank": rank}
            sampler = DistributedSampler(data, shuffle=True, **options)
            loader = DataLoader(data, batch_size=8, sampler=sampler)
            model = DDP(torch.nn.Linear(4, 1))
            optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
            for x, y in loader:
                loss = (model(x) - y).pow(2).mean()
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()


        if __name__ == "__main__":
            mp.spawn(train, args=(2,), nprocs=2)
    """)
    returned = script("""\
        def setup_dist():
            dist.init_process_group("gloo")
            rank = dist.get_rank()
            world = dist.get_world_size()
            return rank, world, int(os.environ["LOCAL_RANK"])


        def main():
            rank, world, local_rank = setup_dist()
            data = TensorDataset(torch.randn(64, 4), torch.randn(64, 1))
            sampler = DistributedSampler(data, num_replicas=world, rank=rank, shuffle=True)
            loader = DataLoader(data, batch_size=8, sampler=sampler)
            model = DDP(torch.nn.Linear(4, 1))
            optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
            for x, y in loader:
                loss = (model(x) - y).pow(2).mean()
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()
    """)
    for source in (told, returned):
        output, findings = migrate(source)
        assert [f.code for f in findings if f.needs_human] == [], findings
        assert "DistributedSampler" not in output
        assert "loader = DataLoader(data, batch_size=8, shuffle=True)" in output


def test_replicas_the_process_group_was_not_told_are_still_refused():
    source = script("""\
        def train(rank, world_size):
            dist.init_process_group("gloo", rank=rank, world_size=world_size)
            data = TensorDataset(torch.randn(64, 4), torch.randn(64, 1))
            sampler = DistributedSampler(data, num_replicas=world_size - 1, rank=rank)
            loader = DataLoader(data, batch_size=8, sampler=sampler)
            model = DDP(torch.nn.Linear(4, 1))
            optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
            for x, y in loader:
                loss = (model(x) - y).pow(2).mean()
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()
    """)
    output, findings = migrate(source)
    assert output is None
    assert "passes `num_replicas=` at line" in findings[0].message


FACTORY = """\
    def setup(rank, world_size):
        dist.init_process_group("gloo", rank=rank, world_size=world_size)


    def get_loader(rank, world_size):
        data = TensorDataset(torch.randn(64, 4), torch.randn(64, 1))
        sampler = DistributedSampler(data, num_replicas={replicas}, rank=rank, shuffle=True)
        loader = DataLoader(data, batch_size=8, sampler=sampler)
        return loader, sampler


    def train(rank, world_size):
        setup(rank, world_size)
        loader, sampler = get_loader(rank, world_size)
        model = DDP(torch.nn.Linear(4, 1))
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        for epoch in range(2):
            sampler.set_epoch(epoch)
            for x, y in loader:
                loss = (model(x) - y).pow(2).mean()
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()


    if __name__ == "__main__":
        mp.spawn(train, args=(2,), nprocs=2)
"""


def test_a_sampler_made_by_a_loader_factory_from_its_callers_rank_goes_with_it():
    """`get_loader(rank, world_size)` is called only by the worker that tells the process
    group the same two names; it returns its sampler, which the caller only `set_epoch`s:
    the factory returns None in its place and the calls go."""
    output, findings = migrate(script(FACTORY.format(replicas="world_size")))
    assert [f.code for f in findings if f.needs_human] == [], findings
    assert "DistributedSampler" not in output and "set_epoch" not in output
    assert "    loader = DataLoader(data, batch_size=8, shuffle=True)\n" in output
    assert "    return loader, None\n" in output
    assert "    loader, sampler = get_loader(" in output


def test_a_factory_sampler_the_group_was_not_told_or_used_beyond_set_epoch_is_refused():
    output, findings = migrate(script(FACTORY.format(replicas="world_size + 1")))
    assert output is None and "passes `num_replicas=` at line" in findings[0].message
    used = FACTORY.format(replicas="world_size").replace(
        "sampler.set_epoch(epoch)", "print(len(sampler))"
    )
    output, findings = migrate(script(used))
    assert output is None and "DistributedSampler `sampler` is used at line" in findings[0].message


def test_a_factory_sampler_set_epoch_under_a_none_test_goes_with_its_test():
    """`if sampler is not None: sampler.set_epoch(epoch)` in the caller (h10 review: a
    program refused over it): the test and its call go, the factory returns None."""
    for test in ("if sampler is not None:", "if sampler:"):
        guarded = FACTORY.format(replicas="world_size").replace(
            "            sampler.set_epoch(epoch)",
            f"            {test}\n                sampler.set_epoch(epoch)",
        )
        output, findings = migrate(script(guarded))
        assert [f.code for f in findings if f.needs_human] == [], findings
        assert "sampler.set_epoch" not in output and test not in output, output
        assert "    return loader, None\n" in output
    used = FACTORY.format(replicas="world_size").replace(
        "            sampler.set_epoch(epoch)",
        "            if sampler is not None:\n                print(sampler.epoch)",
    )
    output, findings = migrate(script(used))
    assert output is None and "DistributedSampler `sampler` is used at line" in findings[0].message


ARGS_TOLD = """\
    def train(gpu, args):
        rank = args.nr * args.gpus + gpu
        dist.init_process_group("gloo", rank=rank, world_size=args.world_size)
        data = TensorDataset(torch.randn(64, 4), torch.randn(64, 1))
        sampler = DistributedSampler(data, num_replicas=args.world_size, rank=rank)
        loader = DataLoader(data, batch_size=8, sampler=sampler)
        model = DDP(torch.nn.Linear(4, 1))
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        for x, y in loader:
            loss = (model(x) - y).pow(2).mean()
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
"""


def test_replicas_told_as_the_same_attribute_chain_go_with_the_sampler():
    """`num_replicas=args.world_size` where the same function told the process group
    `world_size=args.world_size` (h11 review: a program refused as "not the world size")."""
    output, findings = migrate(script(ARGS_TOLD))
    assert output is not None and "DistributedSampler" not in output, findings
    assert "DataLoader(data, batch_size=8, shuffle=True)" in output
    told = '        dist.init_process_group("gloo", rank=rank, world_size=args.world_size)\n'
    for change in ("args.world_size = 2", "args = parse()"):
        rebound = ARGS_TOLD.replace(told, f"{told}        {change}\n")
        output, findings = migrate(script(rebound))
        assert output is None and "passes `num_replicas=` at line" in findings[0].message, change
