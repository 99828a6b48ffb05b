"""A class's method that sets its model up before making the optimizer (issue 16): attribute
writes, `.apply(init)`, a state loaded, `print(self.model)` keep the plain model and prepare
goes after the optimizer; a forward or a hand-over to unknown code before then is refused by
name; an optimizer made under a condition is prepared in its branch, or at the method's top
level when `__init__` gives it a placeholder.
The reviewed golden (fixtures/golden/class_objects_setup_uses) runs on two processes in
test_idioms_objects.py."""

from __future__ import annotations

import textwrap

from tests.test_class_objects import lines_of, migrate, warnings

TRAIN = """
    def fit(self, loader):
        for x, y in loader:
            self.opt.zero_grad()
            nn.functional.mse_loss(self.model(x), y).backward()
            self.opt.step()
"""


def trainer(init: str, rest: str = TRAIN) -> str:
    return "class Trainer:\n" + textwrap.indent(
        textwrap.dedent(init) + textwrap.dedent(rest), "    "
    )


def test_attribute_written_and_weights_set_up_before_the_optimizer_stay_plain():
    output, findings = migrate(
        trainer("""
        def __init__(self, model):
            self.model = model
            self.model.best_state = None
            self.model.apply(lambda m: None)
            self.model.load_state_dict(torch.load("init.pt"))
            print(self.model)
            self.opt = torch.optim.SGD(self.model.parameters(), lr=0.1)
            self.epochs = 3
    """)
    )
    assert not warnings(findings), warnings(findings)
    lines = lines_of(output)
    init = lines.index("def __init__(self, model):")
    assert lines[init + 1 : init + 9] == [
        "self.accelerator = Accelerator()",
        "self.model = model",
        "self.model.best_state = None",  # the plain model, before prepare: no unwrap
        "self.model.apply(lambda m: None)",
        'self.model.load_state_dict(torch.load("init.pt"))',
        "self.accelerator.print(self.model)",
        "self.opt = torch.optim.SGD(self.model.parameters(), lr=0.1)",
        "",
    ]
    assert (
        lines[init + 9] == "self.model, self.opt = self.accelerator.prepare(self.model, self.opt)"
    )
    assert output.count(".prepare(") == 2  # the loader `fit()` receives, there


def test_model_attribute_read_after_prepare_goes_through_unwrap_model():
    """DDP's __getattr__ finds parameters, buffers and submodules only: `best_state` written
    on the plain model is read (and written again, and tested) on the unwrapped one."""
    output, findings = migrate(
        trainer(
            """
        def __init__(self, model):
            self.model = model
            self.model.best_state = None
            self.opt = torch.optim.SGD(self.model.parameters(), lr=0.1)
    """,
            TRAIN
            + """
    def keep_best(self):
        self.model.best_state = self.model.state_dict()
        if hasattr(self.model, "best_state") and getattr(self.model, "training", True):
            self.model.load_state_dict(self.model.best_state)
    """,
        )
    )
    assert not warnings(findings), warnings(findings)
    lines = lines_of(output)
    unwrap = "self.accelerator.unwrap_model(self.model)"
    assert f"{unwrap}.best_state = {unwrap}.state_dict()" in lines
    # `training` is nn.Module's own: DDP answers it, the wrapper stays
    assert (f'if hasattr({unwrap}, "best_state") and getattr(self.model, "training", True):'
            in lines)  # fmt: skip
    assert f"{unwrap}.load_state_dict({unwrap}.best_state)" in lines
    assert "self.model.best_state = None" in lines


def test_forward_before_the_optimizer_is_refused_naming_it():
    output, findings = migrate(
        trainer("""
        def __init__(self, model):
            self.model = model
            self.model(torch.zeros(1, 4))
            self.opt = torch.optim.SGD(self.model.parameters(), lr=0.1)
    """)
    )
    assert output is None
    assert any("found `self.model` used at line 8 (a forward) before `self.opt`, made at "
               "line 9" in m for m in warnings(findings)), warnings(findings)  # fmt: skip


def test_model_handed_to_unknown_code_before_the_optimizer_is_refused_naming_the_callee():
    output, findings = migrate(
        trainer("""
        def setup(self, model):
            from surgery import recentre
            self.model = model
            recentre(self.model)
            self.opt = torch.optim.SGD(self.model.parameters(), lr=0.1)

        def __init__(self, model):
            self.setup(model)
    """)
    )
    assert output is None
    assert any("in `setup()`" in m and "`self.model` used at line 9 (handed to "
               "`surgery.recentre()`, which may run it) before `self.opt`" in m
               for m in warnings(findings)), warnings(findings)  # fmt: skip


def test_objects_made_and_used_in_one_resume_branch_are_refused_naming_the_branch():
    output, findings = migrate("""
        class Trainer:
            def __init__(self, loader):
                self.loader = loader

            def train(self, model, resume=False):
                if resume:
                    state = torch.load("last.pt")
                    model = state["model"]
                    self.opt = state["optimizer"]
                    inner = self.opt.optimizer  # a wrapper's optimizer, rebuilt on the new model
                    self.opt.optimizer = type(inner)(model.parameters(), **inner.defaults)
                else:
                    self.opt = torch.optim.Adam(model.parameters())
                for x, y in self.loader:
                    self.opt.zero_grad()
                    nn.functional.mse_loss(model(x), y).backward()
                    self.opt.step()
    """)
    assert output is None
    assert any("found `self.opt` used at line 14 inside the `if` at line 10, which also makes "
               "`model` (line 12): they are made and used in one branch" in m
               for m in warnings(findings)), warnings(findings)  # fmt: skip


def test_optimizer_made_under_a_condition_with_a_placeholder_in_init_is_prepared():
    """`self.opt_info = None` in `__init__`, an Adam only for one kind of model: prepare
    passes None through as it is (HF Accelerate too), so one prepare after the `if` serves
    both kinds."""
    output, findings = migrate("""
        class Trainer:
            def __init__(self, kind, model, loader):
                self.kind = kind
                self.model = model
                self.loader = loader
                self.opt = None
                self.opt_info = None

            def create_optim(self, lr):
                self.opt = torch.optim.Adam(self.model.parameters(), lr=lr)
                if self.kind == "info":
                    self.opt_info = torch.optim.Adam(self.model.parameters(), lr=lr)
                self.lr = lr

            def fit(self):
                for x, y in self.loader:
                    self.opt.zero_grad()
                    nn.functional.mse_loss(self.model(x), y).backward()
                    self.opt.step()
                    if self.kind == "info":
                        self.opt_info.zero_grad()
                        nn.functional.mse_loss(self.model(x), y).backward()
                        self.opt_info.step()
    """)
    assert not warnings(findings), warnings(findings)
    lines = lines_of(output)
    made = lines.index("self.opt_info = torch.optim.Adam(self.model.parameters(), lr=lr)")
    assert lines[made + 1 : made + 6] == [
        "",
        "self.model, self.opt_info, self.opt = self.accelerator.prepare(",
        "self.model, self.opt_info, self.opt",
        ")",
        "self.lr = lr",
    ]


def test_optimizer_chain_without_else_or_placeholder_is_prepared_in_each_branch():
    output, findings = migrate("""
        class Trainer:
            def __init__(self, kind, model, loader):
                self.kind = kind
                self.model = model
                self.loader = loader

            def create_optim(self, lr):
                self.opt = torch.optim.Adam(self.model.parameters(), lr=lr)
                if self.kind == "info":
                    self.opt_info = torch.optim.Adam(self.model.parameters(), lr=lr)
                    print(self.opt_info)
                elif self.kind == "plain":
                    self.opt_info = torch.optim.SGD(self.model.parameters(), lr=lr)
                self.lr = lr

            def fit(self):
                for x, y in self.loader:
                    self.opt.zero_grad()
                    nn.functional.mse_loss(self.model(x), y).backward()
                    self.opt.step()
                    if self.kind == "info":
                        self.opt_info.zero_grad()
                        nn.functional.mse_loss(self.model(x), y).backward()
                        self.opt_info.step()
    """)
    assert not warnings(findings), warnings(findings)
    lines = lines_of(output)
    start = lines.index("def create_optim(self, lr):")
    assert lines[start + 1 : start + 14] == [
        "self.opt = torch.optim.Adam(self.model.parameters(), lr=lr)",
        "",
        "self.model, self.opt = self.accelerator.prepare(self.model, self.opt)",
        'if self.kind == "info":',
        "self.opt_info = torch.optim.Adam(self.model.parameters(), lr=lr)",
        "",
        "self.opt_info = self.accelerator.prepare(self.opt_info)",
        "self.accelerator.print(self.opt_info)",
        'elif self.kind == "plain":',
        "self.opt_info = torch.optim.SGD(self.model.parameters(), lr=lr)",
        "",
        "self.opt_info = self.accelerator.prepare(self.opt_info)",
        "self.lr = lr",
    ]


def test_optimizer_made_in_a_loop_is_still_refused():
    output, findings = migrate("""
        class Trainer:
            def __init__(self, model, loader):
                self.model = model
                self.loader = loader

            def create_optim(self, rates):
                for lr in rates:
                    self.opt = torch.optim.Adam(self.model.parameters(), lr=lr)

            def fit(self):
                for x, y in self.loader:
                    self.opt.zero_grad()
                    nn.functional.mse_loss(self.model(x), y).backward()
                    self.opt.step()
    """)
    assert output is None
    assert any("`create_optim()` where `self.opt` always exists" in m
               for m in warnings(findings)), warnings(findings)  # fmt: skip


def test_data_parallel_then_module_access_and_an_optimizer_chain():
    output, findings = migrate("""
        class Solver:
            def __init__(self, config, loader):
                self.config = config
                self.loader = loader

            def load_model(self, net):
                self.model = nn.DataParallel(net).cuda()
                if self.config.zero_head:
                    head = self.model.module.head
                    head.weight.data.zero_()
                if self.config.optim == "adam":
                    self.opt = torch.optim.Adam(self.model.parameters())
                elif self.config.optim == "sgd":
                    self.opt = torch.optim.SGD(self.model.parameters(), lr=0.1)
                else:
                    raise NotImplementedError(self.config.optim)

            def train(self):
                for x, y in self.loader:
                    self.opt.zero_grad()
                    nn.functional.mse_loss(self.model(x.cuda()), y.cuda()).backward()
                    self.opt.step()
    """)
    assert not warnings(findings), warnings(findings)
    lines = lines_of(output)
    assert "self.model = net" in lines  # the wrapper goes, the model stays
    assert "head = self.accelerator.unwrap_model(self.model).head" in lines
    raised = lines.index("raise NotImplementedError(self.config.optim)")
    assert lines[raised + 1 : raised + 3] == [
        "",
        "self.model, self.opt = self.accelerator.prepare(self.model, self.opt)",
    ]
    notes = [f.message for f in findings if f.code == "MIG901"]
    prepared = (
        "nn.DataParallel around `self.model` removed: accelerator.prepare wraps it in DDP, one "
        "process per device (`migrate launch --nproc N`)"
    )
    assert notes == [prepared]


def test_indexing_the_prepared_model_goes_through_unwrap_model():
    """`self.model[-1]` of an nn.Sequential: DDP has no __getitem__."""
    output, findings = migrate(
        trainer(
            """
        def __init__(self, model):
            self.model = model
            self.opt = torch.optim.SGD(self.model.parameters(), lr=0.1)
    """,
            TRAIN
            + """
    def head_norm(self):
        return self.model[-1].weight.norm()
    """,
        )
    )
    assert not warnings(findings), warnings(findings)
    assert "return self.accelerator.unwrap_model(self.model)[-1].weight.norm()" in lines_of(output)


PIPELINE = """
    class Pipeline:
        def __init__(self, model):
            self.model = model
            self.opt = torch.optim.SGD(self.model.parameters(), lr=0.1)

        def train(self, train_loader):
            for x, y in train_loader:
                self.opt.zero_grad()
                nn.functional.mse_loss(self.model(x), y).backward()
                self.opt.step()

        def cross_validate(self, dataset, k):
            for fold in range(k):
                train_loader = DataLoader(dataset, batch_size=4, shuffle=True)
                self.train(train_loader)
"""


def test_public_method_receiving_loaders_made_by_a_sibling_says_what_callers_elsewhere_do():
    """`Pipeline` is made by a driver elsewhere, which may call `train()` with its own
    loaders: this file prepares only those `cross_validate()` makes, and says so."""
    output, findings = migrate(PIPELINE)
    assert "train_loader = self.accelerator.prepare(train_loader)" in lines_of(output)
    notes = [f.message for f in findings if "is not made in this file" in f.message]
    expected = (
        "`Pipeline.train()` is public and `Pipeline` is not made in this file: the loaders it "
        "receives (`train_loader`) are prepared where `cross_validate()` makes them; a caller "
        "in another file must pass loaders prepared with the same accelerator "
        "(`pipeline.accelerator.prepare(loader)`), or its batches are neither sharded nor "
        "placed on the device"
    )
    assert notes == [expected], notes
    # made in this file: the callers are all here, nothing to say
    made_here = textwrap.dedent(PIPELINE) + "\nPipeline(nn.Linear(2, 1)).cross_validate(None, 2)\n"
    output, findings = migrate(made_here)
    assert output is not None, findings
    assert not [f for f in findings if "is not made in this file" in f.message]


INIT_HELPERS = """
    def init_head(model):
        model.head.weight.data.normal_(0, 0.01)
        model.head.bias.data.zero_()

    def warm(model):
        model.encode(torch.zeros(1, 4))

"""


def test_a_weight_init_helper_of_this_file_is_set_up_but_one_calling_a_method_is_not():
    init = """
        class Trainer:
            def __init__(self, model):
                self.model = model
                HELPER(self.model)
                self.opt = torch.optim.SGD(self.model.parameters(), lr=0.1)
    """
    body = (
        textwrap.dedent(INIT_HELPERS)
        + textwrap.dedent(init)
        + textwrap.indent(textwrap.dedent(TRAIN), "    ")
    )
    output, findings = migrate(body.replace("HELPER", "init_head"))
    assert not warnings(findings), warnings(findings)
    lines = lines_of(output)
    made = lines.index("self.opt = torch.optim.SGD(self.model.parameters(), lr=0.1)")
    assert lines[made - 1] == "init_head(self.model)"  # the plain model's weights set
    assert (
        lines[made + 2] == "self.model, self.opt = self.accelerator.prepare(self.model, self.opt)"
    )
    output, findings = migrate(body.replace("HELPER", "warm"))
    assert output is None
    assert any("(handed to `warm()`, which may run it)" in m for m in warnings(findings))
