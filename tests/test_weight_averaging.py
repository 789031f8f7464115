"""runtime/weight_averaging.py: the average against a float64 recomputation, what validation sees, a resume
that goes on with the same average; through train.py, final.ckpt and both exports hold the averaged weights."""

import lightning as L
import pytest
import torch
from torch.utils.data import DataLoader, TensorDataset

from helpers import NO_VIEWS, train_in_process
from model.inference.export import export_ctranslate2
from model.inference.translator import Translator
from runtime.timing import RunClock
from runtime.weight_averaging import ExponentialAverage, ramped_decay

DECAY = 0.4  # the ramp (1 + n) / (10 + n) reaches it at n = 5: a dozen steps see both the ramp and the cap


class Regression(L.LightningModule):
    """A linear layer fitted by plain SGD to one fixed batch: each step moves the weights, the same in every run."""

    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.layer = torch.nn.Linear(4, 3)
        self.validated: list[list[torch.Tensor]] = []  # the weights each validation saw

    def training_step(self, batch, batch_idx):
        x, y = batch
        return torch.nn.functional.mse_loss(self.layer(x), y)

    def validation_step(self, batch, batch_idx):
        self.validated.append([p.detach().double().clone() for p in self.parameters()])

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.1)


class Recorder(L.Callback):
    """The training weights after every optimizer step, and those a callback sees when a validation epoch ends
    (where the attention views draw), in float64."""

    def __init__(self) -> None:
        self.steps: list[list[torch.Tensor]] = []
        self.views: list[list[torch.Tensor]] = []

    def on_train_batch_end(self, trainer, pl_module, *args) -> None:
        self.steps.append([p.detach().double().clone() for p in pl_module.parameters()])

    def on_validation_epoch_end(self, trainer, pl_module) -> None:
        self.views.append([p.detach().double().clone() for p in pl_module.parameters()])


def batches() -> DataLoader:
    generator = torch.Generator().manual_seed(1)
    x, y = torch.randn(8, 4, generator=generator), torch.randn(8, 3, generator=generator)
    return DataLoader(TensorDataset(x, y), batch_size=8)  # one batch: a step is an epoch, resumable anywhere


def fit(module: Regression, steps: int, *callbacks: L.Callback, ckpt_path=None, validate_every: int | None = None):
    trainer = L.Trainer(max_steps=steps, accelerator="cpu", logger=False, enable_checkpointing=False,
                        enable_progress_bar=False, enable_model_summary=False, callbacks=list(callbacks),
                        check_val_every_n_epoch=validate_every, limit_val_batches=1 if validate_every else 0,
                        num_sanity_val_steps=0)
    trainer.fit(module, batches(), batches() if validate_every else None, ckpt_path=ckpt_path)
    return trainer


def recomputed(steps: list[list[torch.Tensor]]) -> list[torch.Tensor]:
    """The ramped EMA of ``steps`` in float64: the first update copies, the n-th keeps min(decay, (1+n)/(10+n))."""
    average = [w.clone() for w in steps[0]]
    for n, weights in enumerate(steps[1:], start=1):
        kept = min(DECAY, (1 + n) / (10 + n))
        average = [kept * a + (1 - kept) * w for a, w in zip(average, weights)]
    return average


def test_the_decay_ramps_up_to_its_ceiling():
    assert [ramped_decay(0.999, n) for n in (0, 1, 90, 100_000)] == pytest.approx([0.0, 2 / 11, 0.91, 0.999])
    with pytest.raises(ValueError, match=r"decay=1.0 must be in \[0, 1\)"):
        ExponentialAverage(decay=1.0)


def test_the_average_equals_a_float64_recomputation_and_training_goes_on_with_its_own_weights():
    module, recorder, averaging = Regression(), Recorder(), ExponentialAverage(decay=DECAY)
    averaging.clock = RunClock()  # as the run machinery sets it: the updates timed as "averaging"
    fit(module, 12, averaging, recorder, validate_every=4)  # what a callback after it sees at validation's end
    assert averaging.clock.seconds["averaging"] > 0 and averaging.updates == 12
    plain_module, plain = Regression(), Recorder()  # the same training without averaging
    fit(plain_module, 12, plain)
    # Averaging never touches the weights training goes on with, validations included.
    for mine, theirs in zip(recorder.steps, plain.steps, strict=True):
        for a, b in zip(mine, theirs):
            torch.testing.assert_close(a, b, rtol=0, atol=0)
    # Each validation, and what a callback draws at its end, saw the average of the steps so far; the model ends
    # holding the average of all.
    for validated, drawn, steps in zip(module.validated, recorder.views, (4, 8, 12), strict=True):
        for seen, shown, expected in zip(validated, drawn, recomputed(recorder.steps[:steps])):
            torch.testing.assert_close(seen, expected, rtol=1e-6, atol=1e-7)
            torch.testing.assert_close(shown, expected, rtol=1e-6, atol=1e-7)
    final = recomputed(recorder.steps)
    for weight, expected, last in zip(module.parameters(), final, recorder.steps[-1]):
        torch.testing.assert_close(weight.detach().double(), expected, rtol=1e-6, atol=1e-7)
        assert (expected - last).abs().max() > 1e-3  # an average, not the last weights


class SaveAt(L.Callback):
    """A checkpoint written after the given step's averaging (a callback after it), as the run machinery's is."""

    def __init__(self, step: int, path) -> None:
        self.step, self.path = step, path

    def on_train_batch_end(self, trainer, pl_module, *args) -> None:
        if trainer.global_step == self.step:
            trainer.save_checkpoint(self.path)


def test_a_resumed_run_goes_on_with_the_same_average(tmp_path):
    checkpoint = tmp_path / "step6.ckpt"
    whole = Regression()
    fit(whole, 12, ExponentialAverage(decay=DECAY), SaveAt(6, checkpoint))
    saved = torch.load(checkpoint, weights_only=True)
    assert saved["averaging_state"]["n_averaged"] == 6 and "current_model_state" in saved
    resumed = Regression()
    torch.manual_seed(5)
    torch.nn.init.normal_(resumed.layer.weight)  # whatever it starts with, the checkpoint decides
    fit(resumed, 12, ExponentialAverage(decay=DECAY), ckpt_path=checkpoint)
    for a, b in zip(resumed.parameters(), whole.parameters()):
        torch.testing.assert_close(a, b, rtol=0, atol=0)


@pytest.fixture(scope="module")
def averaged_run(tmp_path_factory, data_cache):
    run = tmp_path_factory.mktemp("averaged") / "run"
    train_in_process(run, data_cache, "averaging=ema", "trainer.max_steps=30", "test=false", NO_VIEWS)
    return run


def test_final_ckpt_and_best_ckpt_hold_the_average(averaged_run):
    checkpoints = averaged_run / "checkpoints"
    last = torch.load(checkpoints / "last.ckpt", weights_only=True)  # step 30, saved before training ended
    final = torch.load(checkpoints / "final.ckpt", weights_only=True)
    best = torch.load(checkpoints / "best.ckpt", weights_only=True)  # validated at step 30: the average
    assert last["global_step"] == final["global_step"] == best["global_step"] == 30
    assert last["averaging_state"]["n_averaged"] == 30 and last["callbacks"]
    names = list(final["state_dict"])
    assert names == list(last["state_dict"]) == list(last["current_model_state"])
    assert all(torch.equal(final["state_dict"][n], last["state_dict"][n]) for n in names)
    assert all(torch.equal(best["state_dict"][n], last["state_dict"][n]) for n in names)
    assert max((last["current_model_state"][n] - last["state_dict"][n]).abs().max() for n in names) > 1e-4


def test_train_py_resumes_the_average_from_a_checkpoint(averaged_run, data_cache, tmp_path):
    resumed = tmp_path / "resumed"
    train_in_process(resumed, data_cache, "averaging=ema", "trainer.max_steps=40", "test=false", NO_VIEWS,
                     f"ckpt_path={averaged_run / 'checkpoints' / 'last.ckpt'}")
    last = torch.load(resumed / "checkpoints" / "last.ckpt", weights_only=True)
    assert last["global_step"] == 40 and last["averaging_state"]["n_averaged"] == 40  # 30 restored, 10 more


def forced_log_probs(model, source: list[int], target: list[int], bos: int) -> list[float]:
    """Each target token's log-probability under ``model`` after the ones before it."""
    with torch.no_grad():
        logits = model(torch.tensor([source]), torch.tensor([[bos] + target[:-1]]))[0].double()
    return logits.log_softmax(-1).gather(1, torch.tensor(target)[:, None]).squeeze(1).tolist()


def test_both_exports_hold_the_averaged_weights(averaged_run, tmp_path):
    ours = Translator.load(averaged_run, device="cpu")
    last = torch.load(averaged_run / "checkpoints" / "last.ckpt", weights_only=True)
    assert all(torch.equal(p, last["state_dict"][f"model.{n}"]) for n, p in ours.model.state_dict().items())
    training_weights = Translator.load(averaged_run, device="cpu").model
    training_weights.load_state_dict({n[len("model."):]: p for n, p in last["current_model_state"].items()})
    source = ours.encode(["I like cats."])[0]
    target = ours.translate(["I like cats."])[0].sentences[0].output_ids[:5] + [ours.tokenizer.eos_id]  # it ends
    averaged = forced_log_probs(ours.model, source, target, ours.tokenizer.bos_id)
    trained = forced_log_probs(training_weights, source, target, ours.tokenizer.bos_id)
    assert max(abs(a - b) for a, b in zip(averaged, trained)) > 1e-3  # the two weights tell apart here

    import ctranslate2

    folder = export_ctranslate2(ours.model, ours.tokenizer, ours.files.checkpoint, tmp_path / "ct2")
    pieces = lambda ids: [ours.tokenizer.src.id_to_token(i) for i in ids]  # noqa: E731 (one vocabulary)
    engine = ctranslate2.Translator(str(folder), device="cpu")
    scored = engine.score_batch([pieces(source)], [pieces(target[:-1])])[0]  # it adds the EOS itself
    assert scored.log_probs == pytest.approx(averaged, abs=1e-4)

    from model.inference.export_transformers import export_transformers
    from transformers import AutoModelForSeq2SeqLM

    hub = export_transformers(ours.model, ours.tokenizer, ours.settings, ours.files.checkpoint, tmp_path / "hub")
    pegasus = AutoModelForSeq2SeqLM.from_pretrained(hub).eval()
    with torch.no_grad():
        logits = pegasus(input_ids=torch.tensor([source]),
                         decoder_input_ids=torch.tensor([[ours.tokenizer.bos_id] + target[:-1]])).logits[0].double()
    exported = logits.log_softmax(-1).gather(1, torch.tensor(target)[:, None]).squeeze(1).tolist()
    assert exported == pytest.approx(averaged, abs=1e-4)
