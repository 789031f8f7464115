"""Train with casing noise instead of truecasing: the other way to a word's usual case, measured against the
default in docs/results.md ("One spelling per word", "Truecasing or casing noise").

Each line is still read with a leading space, but no first word is lowered (neither in training nor in
translation); instead the training pairs are varied as Mozilla's translation pipeline does with OpusTrainer's
modifiers: of the pairs, 7% written in capitals and 5% in Title Case (both sides), 20% without their final
punctuation, and 20% of the other source sides given a lower-case first letter. Each pair's variant is drawn once, from
its text and the seed, when the cache is tokenized (OpusTrainer draws again every epoch). Takes ``train.py``'s
arguments; give it a cache of its own (``data.cache_dir=...``), as the settings do not name the noise:

    python scripts/casing_noise.py logger=csv data.cache_dir=/tmp/noise_cache hydra.run.dir=outputs/noise
"""

from __future__ import annotations

import random
import runpy
import re
import sys
import zlib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from data.tokenizer import TranslationTokenizer  # noqa: E402
from data.truecase import Truecaser  # noqa: E402

CAPS, TITLE, NO_END_PUNCTUATION, LOWER_FIRST = 0.07, 0.05, 0.20, 0.20  # shares of the training pairs
END_PUNCTUATION = re.compile(r"[.!?。…]+$")


def title_case(text: str) -> str:
    """Every word's first letter capitalized ("Don't Go Home."; ``str.title`` would write "Don'T")."""
    return " ".join(word[:1].upper() + word[1:] for word in text.split(" "))


def noised(source: str, target: str) -> tuple[str, str]:
    """The pair's variant: drawn from its text, so that every process and every rebuild draws the same."""
    draw = random.Random(zlib.crc32(f"{source}\t{target}".encode()))
    roll = draw.random()
    if roll < CAPS:
        source, target = source.upper(), target.upper()
    elif roll < CAPS + TITLE:
        source, target = title_case(source), title_case(target)
    if draw.random() < NO_END_PUNCTUATION:
        source, target = END_PUNCTUATION.sub("", source), END_PUNCTUATION.sub("", target)
    if draw.random() < LOWER_FIRST and roll >= CAPS:
        source = source[:1].lower() + source[1:]
    return source, target


def main() -> None:
    encode_pairs = TranslationTokenizer.encode_pairs

    def noised_pairs(self, sources: list[str], targets: list[str], training: bool) -> tuple[list, list]:
        if training:
            sources, targets = map(list, zip(*(noised(s, t) for s, t in zip(sources, targets)))) if sources else ([], [])
        return encode_pairs(self, sources, targets, training)

    TranslationTokenizer.encode_pairs = noised_pairs
    Truecaser.learn = classmethod(lambda cls, pairs: cls([], []))  # no first word lowered: lines read as typed
    runpy.run_path(str(ROOT / "train.py"), run_name="__main__")  # as ``python train.py`` (Hydra finds configs/)


if __name__ == "__main__":
    main()
