"""``averaging=ema`` (Lightning's ``EMAWeightAveraging``) through train.py: final.ckpt and best.ckpt hold the average,
a resume goes on with it, and both exports hold the averaged weights."""

import pytest
import torch

from helpers import NO_VIEWS, train_in_process
from model.inference.export import export_ctranslate2
from model.inference.translator import Translator


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
