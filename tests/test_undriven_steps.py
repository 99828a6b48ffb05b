"""Never silent: a backward and an optimizer step in functions that no loop of the file drives
(Lightning-style hooks, a mixed-precision helper's `backward` method) get a MIG905 note naming
the function and the uncalled functions that reach it; a step helper a loop here calls, directly
or through other functions, is migrated with that loop as before."""

from __future__ import annotations

import textwrap

from migrator.engine import migrate_text


def _notes(source: str):
    output, findings = migrate_text(textwrap.dedent(source))
    return output, [(f.code, f.line, f.message) for f in findings]


def test_a_hook_only_an_outside_trainer_calls_is_noted_with_its_callers():
    output, notes = _notes("""\
        import torch


        class Module:
            def __init__(self, model, optimizers):
                self.model = model
                self.optimizers = optimizers

            def _common_step(self, batch, stage):
                x, y = batch
                loss = torch.nn.functional.mse_loss(self.model(x), y)
                if stage == "train":
                    self.optimizers["main"].zero_grad()
                    loss.backward()
                    self.optimizers["main"].step()
                return loss

            def training_step(self, batch):
                return self._common_step(batch, "train")

            def validation_step(self, batch):
                with torch.no_grad():
                    return self._common_step(batch, "val")
        """)
    assert output is None
    [(code, line, message)] = notes
    assert (code, line) == ("MIG905", 14)
    assert (
        "`Module._common_step()`, reached from `training_step()`, `validation_step()`," in message
    )
    assert "nothing in this file calls" in message


def test_an_uncalled_backward_method_beside_an_optimizer_step_is_noted():
    output, notes = _notes("""\
        class MixedPrecision:
            def __init__(self, params, scale=1.0):
                self.params = list(params)
                self.scale = scale

            def backward(self, loss):
                (loss * self.scale).backward()

            def optimize(self, opt):
                for p in self.params:
                    p.grad.mul_(1.0 / self.scale)
                opt.step()
        """)
    assert output is None
    [(code, line, message)] = notes
    assert (code, line) == ("MIG905", 7)
    assert message.startswith("backward() in `MixedPrecision.backward()`, which nothing")


def test_a_step_helper_a_loop_reaches_through_another_function_is_migrated():
    output, notes = _notes("""\
        import torch
        from torch.utils.data import DataLoader, TensorDataset

        model = torch.nn.Linear(4, 1)
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        loader = DataLoader(TensorDataset(torch.randn(8, 4), torch.randn(8, 1)), batch_size=4)


        def update(x, y):
            optimizer.zero_grad()
            loss = torch.nn.functional.mse_loss(model(x), y)
            loss.backward()
            optimizer.step()


        def train_step(batch):
            update(*batch)


        for batch in loader:
            train_step(batch)
        """)
    assert not any("nothing in this file calls" in message for _, _, message in notes)
    assert output is not None and "accelerator.backward(loss)" in output
    assert "accelerator.prepare(model, optimizer, loader)" in output
