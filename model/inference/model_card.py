"""The model card of an exported run: the Hub's format (YAML metadata, then text), every figure read from the
run folder, nothing invented. What the run folder lacks (an older run's time split, say) is left out."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

from data.tokenizer import JOINT_FILE
from data.truecase import FILE as TRUECASE_FILE
from model.inference.run_folder import RunSettings, run_folder_of
from model.transformer import Seq2SeqTransformer


def dataset(settings: RunSettings) -> tuple[str, str, str]:
    """The run's corpus: its name, its Hub ``type`` and a sentence for the card."""
    pair, corpus = settings.pair, settings.corpus
    languages = pair.describe("–")
    split = f"split by {pair.names[0]} sentence so that no test sentence is seen in training"
    if corpus is None or corpus in pair.tatoeba_names():
        return (f"Tatoeba {languages}", "tatoeba",
                f"Tatoeba {languages} pairs (tatoeba.org via manythings.org, CC-BY 2.0 FR), {split}")
    return corpus, corpus, f"{corpus} ({languages}), {split}"


def examples(run_folder: Path) -> list[str]:
    """Two sentences in the run's source language for the card's example: its first test sources."""
    path = run_folder / "test_translations.tsv"
    lines = path.read_text(encoding="utf-8").splitlines()[:2] if path.is_file() else []
    return [line.split("\t")[0] for line in lines] or ["A sentence in the source language."]


def read_json(path: Path) -> dict:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}


def machine_line(run_folder: Path) -> str | None:
    """The machine the run was trained on, as its log says (``machine: …``)."""
    log = run_folder / "train.log"
    found = re.search(r"machine: ([^;\n]+)", log.read_text(encoding="utf-8", errors="replace")) if log.is_file() else None
    return found.group(1) if found else None


def command(run_folder: Path) -> str:
    """``python train.py`` with the overrides Hydra recorded for the run."""
    overrides = run_folder / ".hydra" / "overrides.yaml"
    given = re.findall(r"^- (.+)$", overrides.read_text(encoding="utf-8"), re.M) if overrides.is_file() else []
    return " ".join(["python train.py", *(o for o in given if not o.startswith("hydra."))])


def metadata(scores: dict, settings: RunSettings) -> str:
    """The YAML header: languages, license, library, and the test scores as a ``model-index``."""
    pair, (dataset_name, dataset_type, _) = settings.pair, dataset(settings)
    lines = ["---", "language:", f"- {pair.source}", f"- {pair.target}", "license: cc-by-2.0", "library_name: transformers",
             "pipeline_tag: translation", "tags:", "- translation", "- pegasus", "- attention-from-scratch"]
    metrics = [(name, scores[name], scores.get(f"{name}_signature")) for name in ("bleu", "chrf") if name in scores]
    if metrics:
        lines += ["model-index:", f"- name: attention-from-scratch-{pair.codes}", "  results:", "  - task:",
                  "      type: translation",
                  f"      name: Translation {pair.describe(' to ')}", "    dataset:",
                  f"      name: {dataset_name} (held-out test split)", f"      type: {dataset_type}", "    metrics:"]
        for name, value, signature in metrics:
            lines += [f"    - type: {name}", f"      value: {value:.2f}", f"      name: {name.upper()} (sacreBLEU)"]
            if signature:
                lines.append(f"      args: \"{signature}\"")
    return "\n".join([*lines, "---"])


def model_card(model: Seq2SeqTransformer, settings: RunSettings, checkpoint: Path, folder: Path) -> str:
    """The card for ``folder``, an export of ``checkpoint`` (its run folder has the figures); the explorer's
    picture of the first validation sentence is copied beside it as ``attention.png``."""
    run = run_folder_of(checkpoint)
    scores, split = read_json(run / "test_metrics.json"), read_json(run / "time_split.json")
    d_model, heads = model.src_embed.token.weight.size(1), model.encoder_layers[0].self_attn.num_heads
    shape = (f"{len(model.encoder_layers)} encoder and {len(model.decoder_layers)} decoder layers, d_model {d_model}, "
             f"{heads} heads, feed-forward {model.encoder_layers[0].feed_forward.net[0].out_features}, "
             f"{sum(p.numel() for p in model.parameters()) / 1e6:.1f}M parameters")
    text = [metadata(scores, settings), "", f"# {settings.pair.describe()}, a Transformer trained from scratch", "",
            f"A {shape}, trained by `attention-from-scratch` and exported as a Pegasus model (the same function: "
            f"the model axis is reordered once). Data: {dataset(settings)[2]}.", "", "## Use", "", "```python",
            "from transformers import AutoModelForSeq2SeqLM, AutoTokenizer",
            "tokenizer = AutoTokenizer.from_pretrained(\"path/to/this/folder\")",
            "model = AutoModelForSeq2SeqLM.from_pretrained(\"path/to/this/folder\")",
            f"batch = tokenizer({json.dumps(examples(run), ensure_ascii=False)}, return_tensors=\"pt\", padding=True, truncation=True)",
            "print(tokenizer.batch_decode(model.generate(**batch), skip_special_tokens=True))", "```", "",
            f"Generation defaults (`generation_config.json`): beam {settings.search.beam_size}, length penalty "
            f"{settings.search.length_penalty}. `generate()` divides a beam's log-probability by length^α where "
            f"training's search used GNMT's ((5 + length) / 6)^α, so beams may rank differently when α > 0; "
            f"greedy outputs are the same.", "", "## Training", ""]
    text.append(f"- command: `{command(run)}`; checkpoint `{checkpoint.name}`")
    if settings.init_from:
        text.append(f"- fine-tuned from `{settings.init_from}`: its weights, tokenizer and shape; scores on its own "
                    f"corpus's test split beside this one's in `test_metrics.json` (`original`)")
    if machine := machine_line(run):
        text.append(f"- machine: {machine}")
    if split:
        shares = ", ".join(f"{name} {100 * share:.1f}%" for name, share in split.get("share", {}).items() if share >= 0.001)
        text.append(f"- {split.get('steps')} optimizer steps in {split.get('wall_s', 0) / 60:.1f} minutes "
                    f"({shares}); {split.get('tokens_per_s_steps')} tokens/s in steps")
    text.append(f"- tokenizer: byte-level BPE, one {settings.pair.describe('+')} vocabulary of {model.src_vocab_size} "
                f"(`{JOINT_FILE}`); a source is cut to {settings.source_limit(model.max_len)} "
                f"tokens, its end-of-sentence kept")
    if scores:
        text += ["", "## Evaluation", "",
                 f"On the {scores.get('sentences')} test sentences (all references per sentence), beam "
                 f"{scores.get('beam_size')}: BLEU {scores.get('bleu', 0):.2f} (`{scores.get('bleu_signature')}`), "
                 f"chrF {scores.get('chrf', 0):.2f} (`{scores.get('chrf_signature')}`)."]
    text += ["", "## Intended use and limitations", "",
             "Short everyday sentences like Tatoeba's. Long, technical or out-of-domain text translates worse. "
             "`generate()` on raw text keeps the names the corpus keeps (Tom, Mary, Boston), but rare names, "
             "numbers and codes may not come through unchanged: the training repository's `translate.py` reads "
             "them as copy slots (`<name1>`, `<num1>`) and fills them in after decoding. Not for anything where a "
             "wrong translation does harm."]
    if (run / TRUECASE_FILE).is_file():
        text += ["", "The model reads a sentence's first word as sentences write it inside (`kitchen`, not `Kitchen`; "
                 "`Tom` stays): lower its first letter where its letters (after opening quotes or ¿ ¡, up to an "
                 "apostrophe or hyphen) are listed in `truecase.json` (`src`) and the rest of the word has no capital; "
                 "then capitalize the translation's first word unless the sentence began with a lower-case letter. "
                 "The training repository's `data/truecase.py` does both (`truecased`, `recapitalized`)."]
    pictures = sorted((run / "attention").glob("step_*/cross_sentence0.png"))
    if pictures:
        shutil.copyfile(pictures[-1], folder / "attention.png")
        text += ["", "## Attention", "", "Cross-attention of one validation sentence at the end of training "
                 f"(rows: {settings.pair.names[1]} tokens produced, columns: {settings.pair.names[0]} tokens read):",
                 "", "![attention](attention.png)"]
    return "\n".join(text) + "\n"
