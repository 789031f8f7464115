"""The data settings: which of them decide the pairs a corpus gives (what a continued or fine-tuned run must keep),
and what ``TranslationDataModule`` refuses among them, one phrase each."""

from __future__ import annotations

from collections.abc import Mapping

from data.languages import pair_problems
from data.readers import reading_problems
from data.tokenizer import MIN_VOCAB_SIZE

# The settings that decide which pairs a corpus gives and how they split (a fine-tune's original corpus: these of
# its starting run); with the BPE settings, what a continued run must keep.
CORPUS_KEYS = ("corpus_path", "hub_path", "hub_name", "hub_split", "corpus_format", "columns", "encoding",
               "source_lang", "target_lang", "val_fraction", "test_fraction", "max_eval_pairs", "seed", "limit_pairs",
               "exclude_words")


def data_problems(settings: Mapping, prefix: str = "") -> list[str]:
    """What ``TranslationDataModule`` refuses among ``settings`` (its arguments), one phrase each, keys
    written with ``prefix`` (``data.`` in train.py's check of a whole config)."""
    problems = pair_problems(settings.get("source_lang", "en"), settings.get("target_lang", "es"), prefix)
    for key in ("vocab_size", "max_tokens", "max_sentence_len"):
        value = settings.get(key, 1)
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            problems.append(f"{prefix}{key}={value!r} must be a whole number >= 1")
    vocab_size = settings.get("vocab_size", MIN_VOCAB_SIZE)
    if not problems and vocab_size < MIN_VOCAB_SIZE:
        problems.append(f"{prefix}vocab_size={vocab_size} is below {MIN_VOCAB_SIZE} (the 256 byte symbols of "
                        f"byte-level BPE and the special tokens)")
    for key in ("limit_pairs", "max_eval_pairs", "learn_pairs"):
        limit = settings.get(key)
        if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit < 1):
            problems.append(f"{prefix}{key}={limit!r} must be a whole number >= 1, or null for every pair")
    for key in ("val_fraction", "test_fraction"):
        share = settings.get(key, 0.02)
        if isinstance(share, bool) or not isinstance(share, (int, float)) or not 0 < share < 0.5:
            problems.append(f"{prefix}{key}={share!r} must be a share between 0 and 0.5")
    if not problems and settings.get("max_tokens", 4096) <= settings.get("max_sentence_len", 128):
        problems.append(f"{prefix}max_tokens={settings.get('max_tokens', 4096)} cannot hold one pair of "
                        f"{prefix}max_sentence_len={settings.get('max_sentence_len', 128)} tokens")
    problems += reading_problems(settings, prefix)
    short = settings.get("short_text", 0.0)
    if isinstance(short, bool) or not isinstance(short, (int, float)) or not 0 <= short <= 1:
        problems.append(f"{prefix}short_text={short!r} must be a share between 0 and 1 (of the training pairs)")
    replay = settings.get("replay", 0.0)
    if isinstance(replay, bool) or not isinstance(replay, (int, float)) or replay < 0:
        problems.append(f"{prefix}replay={replay!r} must be a number >= 0 (original pairs per new training pair)")
    on_device = settings.get("on_device", False)
    if on_device not in (True, False):  # configs' "auto" is settled by the run machinery (runtime/machine.py)
        problems.append(f"{prefix}on_device={on_device!r} must be true or false")
    return problems
