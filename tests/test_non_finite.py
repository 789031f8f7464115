"""runtime/non_finite.py in training (the guard the run machinery hands the module): a non-finite loss applies no update and stops the run at the next
check; an infinite gradient with a finite loss skips its update and training goes on."""

import lightning as L
import pytest
import torch

from helpers import small_datamodule, small_model
from model.training.schedule import budget_schedule
from model.training.translation_module import TranslationModule
from runtime.non_finite import NonFiniteGuard
from runtime.stop_and_clock import StopAndClock


@pytest.fixture(scope="module")
def datamodule(tmp_path_factory):
    return small_datamodule(tmp_path_factory.mktemp("data"))


def test_a_non_finite_loss_applies_no_update_and_stops_at_the_next_check(datamodule, tmp_path, monkeypatch):
    import model.training.translation_module as translation_module
    from runtime.non_finite import NonFiniteLossError

    real, calls = translation_module.label_smoothed_loss, []

    def poisoned(*args):  # the 3rd training batch's loss is NaN (CPU and CUDA paths alike)
        loss, nll, accuracy = real(*args)
        calls.append(1)
        return (loss * float("nan") if len(calls) == 3 else loss), nll, accuracy

    monkeypatch.setattr(translation_module, "label_smoothed_loss", poisoned)
    guard = NonFiniteGuard()
    module = TranslationModule(small_model(datamodule), lambda p: torch.optim.AdamW(p, lr=1e-3, fused=True),
                               budget_schedule(warmup_steps=3), val_bleu_samples=4, guard=guard)

    class Weights(L.Callback):
        def on_train_batch_end(self, trainer, pl_module, *args) -> None:
            if trainer.global_step == 2:  # before the poisoned step
                self.before = [p.detach().clone() for p in pl_module.parameters()]
            if trainer.global_step == 3:  # after it: the fused AdamW skipped the update
                self.after = [p.detach().clone() for p in pl_module.parameters()]

    weights = Weights()
    trainer = L.Trainer(max_steps=20, limit_val_batches=0, log_every_n_steps=5, logger=False,
                        callbacks=[weights, StopAndClock(guard=guard)],  # it asks the guard at logging steps
                        enable_checkpointing=False, enable_progress_bar=False, enable_model_summary=False,
                        default_root_dir=str(tmp_path))
    with pytest.raises(NonFiniteLossError, match=r"the training loss is nan at step 2$"):
        trainer.fit(module, datamodule=datamodule)
    assert trainer.global_step == 5  # stopped at the next logging step (the 5th batch), before any checkpoint
    assert all(torch.equal(a, b) for a, b in zip(weights.before, weights.after))
    assert all(torch.isfinite(p).all() for p in module.parameters())


@pytest.mark.parametrize("clip", [1.0, None])
def test_an_infinite_gradient_with_a_finite_loss_skips_the_update_and_training_goes_on(datamodule, tmp_path, clip):
    module = TranslationModule(small_model(datamodule), lambda p: torch.optim.AdamW(p, lr=1e-3, fused=True),
                               budget_schedule(warmup_steps=3), val_bleu_samples=4, guard=NonFiniteGuard())

    class InfiniteGradient(L.Callback):
        """Step 2's gradient gets one inf (its loss stays finite); the weights around it are kept."""

        def on_before_optimizer_step(self, trainer, pl_module, optimizer) -> None:
            if trainer.global_step == 2:
                self.before = [p.detach().clone() for p in pl_module.parameters()]
                next(pl_module.parameters()).grad.view(-1)[0] = float("inf")

        def on_train_batch_end(self, trainer, pl_module, *args) -> None:
            if trainer.global_step == 3:
                self.after = [p.detach().clone() for p in pl_module.parameters()]

    spy = InfiniteGradient()
    trainer = L.Trainer(max_steps=8, limit_val_batches=0, log_every_n_steps=5, logger=False, callbacks=[spy],
                        gradient_clip_val=clip, enable_checkpointing=False, enable_progress_bar=False,
                        enable_model_summary=False, default_root_dir=str(tmp_path))
    trainer.fit(module, datamodule=datamodule)  # no error: the loss never was non-finite
    assert trainer.global_step == 8 and module.guard.skipped.item() == 1
    assert all(torch.equal(a, b) for a, b in zip(spy.before, spy.after))  # step 2 changed nothing
    assert all(torch.isfinite(p).all() for p in module.parameters())


@pytest.mark.parametrize("skip", [True, False])
def test_a_fused_optimizer_skips_its_update_where_told(skip):
    weight = torch.nn.Parameter(torch.ones(4))
    optimizer = torch.optim.AdamW([weight], lr=0.1, fused=True)
    weight.grad = torch.ones(4)
    NonFiniteGuard().skip_update(torch.tensor(float("inf") if skip else 1.0), optimizer)  # a gradient norm
    optimizer.step()
    assert torch.equal(weight.detach(), torch.ones(4)) is skip
    plain = torch.optim.AdamW([torch.nn.Parameter(torch.ones(1))], lr=0.1)
    NonFiniteGuard().skip_update(torch.tensor(float("nan")), plain)
    assert not hasattr(plain, "found_inf")  # left alone: it would not read it
