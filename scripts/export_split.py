"""Write a split's sources and references, or a topic's pairs: files derived from the corpus (keep them out of git).

    python scripts/export_split.py --split test --out /tmp/test     # /tmp/test.en and /tmp/test.refs.jsonl
    python translate.py run=outputs/my_run input=/tmp/test.en output=/tmp/test.hyp
    python scripts/evaluate.py /tmp/test.hyp /tmp/test.refs.jsonl
    python scripts/export_split.py --source-lang nl --target-lang en --corpus nld-eng.zip --out /tmp/nl
    python scripts/export_split.py --split test --as all_caps --out /tmp/caps    # then: evaluate.py --lowercase
    python scripts/export_split.py --words doctor,hospital,sick,medicine --out health.tsv    # a topic's pairs

``--as``: the sources as the test report also scores them (``model/scoring/pasted_text.py``): joined four to a line
(their references alike), every word capitalized, or in capitals. ``--words``: every pair
of the corpus that mentions one (either side), as a TSV with a header of language codes: a corpus of one's own to
fine-tune on, held out of a base run by the same words (``data.exclude_words``).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from data.casing import title_cased
from data.corpus import locate_corpus
from data.datamodule import TranslationDataModule
from data.languages import LanguagePair
from data.readers import read_pairs
from data.splits import word_pattern
from model.scoring.pasted_text import paragraph_references, paragraphs

AS_PASTED = {"sentences": lambda s, r: (s, r), "paragraphs": lambda s, r: (paragraphs(s), paragraph_references(r)),
             "title_case": lambda s, r: ([title_cased(x) for x in s], r),
             "all_caps": lambda s, r: ([x.upper() for x in s], r)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--split", default="test", choices=["train", "validation", "test"])
    parser.add_argument("--out", required=True, help="path prefix for the sources' and .refs.jsonl files; "
                        "with --words: the TSV")
    parser.add_argument("--corpus", default=None, help="data.corpus_path (default: as train.py finds it)")
    parser.add_argument("--source-lang", default="en", help="data.source_lang")
    parser.add_argument("--target-lang", default="es", help="data.target_lang")
    parser.add_argument("--cache-dir", default=None)
    parser.add_argument("--as", dest="pasted", default="sentences", choices=list(AS_PASTED),
                        help="the sources one a line as the corpus has them, or as people paste them")
    parser.add_argument("--words", help="comma-separated: instead of a split, the corpus' pairs that mention any "
                        "(either side), as one TSV at --out")
    args = parser.parse_args()
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    if args.words:
        pair = LanguagePair(args.source_lang, args.target_lang)
        topic = word_pattern([w.strip() for w in args.words.split(",") if w.strip()])
        pairs, _ = read_pairs(locate_corpus(args.corpus, pair=pair), pair)
        chosen = [(s, t) for s, t in pairs if topic.search(s) or topic.search(t)]
        out.write_text(f"{pair.source}\t{pair.target}\n" + "".join(f"{s}\t{t}\n" for s, t in chosen), encoding="utf-8")
        print(f"{out}: {len(chosen)} of {len(pairs)} pairs")
        return
    datamodule = TranslationDataModule(corpus_path=args.corpus, source_lang=args.source_lang,
                                       target_lang=args.target_lang, cache_dir=args.cache_dir)  # default splits
    datamodule.setup()
    sources, references = AS_PASTED[args.pasted](datamodule.sources(args.split), datamodule.references(args.split))
    Path(f"{out}.{args.source_lang}").write_text("".join(s + "\n" for s in sources), encoding="utf-8")
    with open(f"{out}.refs.jsonl", "w", encoding="utf-8") as f:
        for refs in references:
            f.write(json.dumps(refs, ensure_ascii=False) + "\n")
    print(f"{len(sources)} lines ({sum(map(len, references))} references) -> {out}.{args.source_lang}, "
          f"{out}.refs.jsonl")


if __name__ == "__main__":
    main()
