"""Write the pairs of a corpus that mention a topic as a TSV with a header of language codes: a corpus of your own
to fine-tune on, held out of a base run by the same words (``data.exclude_words``).

    python scripts/topic_slice.py --words doctor,hospital,sick,medicine --out health.tsv
    python train.py "data.exclude_words=[doctor,hospital,sick,medicine]" hydra.run.dir=outputs/base
    python train.py experiment=finetune init_from=outputs/base data.corpus_path=health.tsv

The file is derived from the corpus: keep it out of the repository.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from data.corpus import locate_corpus
from data.languages import LanguagePair
from data.readers import read_pairs
from data.splits import word_pattern


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--words", required=True, help="comma-separated words; a pair mentioning any (either side)")
    parser.add_argument("--out", required=True, type=Path, help="the TSV to write")
    parser.add_argument("--corpus", default=None, help="data.corpus_path (default: as train.py finds it)")
    parser.add_argument("--source-lang", default="en", help="data.source_lang")
    parser.add_argument("--target-lang", default="es", help="data.target_lang")
    args = parser.parse_args()
    pair = LanguagePair(args.source_lang, args.target_lang)
    topic = word_pattern([w.strip() for w in args.words.split(",") if w.strip()])
    pairs, _ = read_pairs(locate_corpus(args.corpus, pair=pair), pair)
    chosen = [(s, t) for s, t in pairs if topic.search(s) or topic.search(t)]
    args.out.write_text(f"{pair.source}\t{pair.target}\n" + "".join(f"{s}\t{t}\n" for s, t in chosen), encoding="utf-8")
    print(f"{args.out}: {len(chosen)} of {len(pairs)} pairs")


if __name__ == "__main__":
    main()
