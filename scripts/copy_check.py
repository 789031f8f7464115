"""How well a run copies what must pass through unchanged (names, numbers, codes), and translates the rest.

    python scripts/copy_check.py outputs/my_run                # 661 sentences, seconds
    python scripts/copy_check.py outputs/my_run --show 5       # and the first misses of each kind

Translates the sentences of ``data/copy_cases.py`` (people, towns and companies from many languages
that the corpus never holds; numbers of 1 to 7 digits, years, prices, times, phone numbers; names that
are English words, joined names, codes, lines of many numbers, typed slot syntax; words to translate)
with the run's own search and prints, per kind, the share whose translation holds what it must.
A run's ``test_metrics.json`` holds the same shares (``copied``).
"""

from __future__ import annotations

import argparse
from pathlib import Path

from data.copy_cases import cases, copy_shares, holds
from data.copy_slots import CopySlots
from data.entities import cased, contains, tokens


def inside_words(run: Path, slots: CopySlots) -> None:
    """How the slot rule reads capitalized words inside the run's test sentences, against the rule before it
    (every word the corpus knows stays a word): how many it makes slots, and how many of those the
    references keep verbatim."""
    rows = [line.split("\t") for line in (run / "test_translations.tsv").read_text(encoding="utf-8").splitlines()]
    before = CopySlots(slots.copied, slots.known, slots.caseless_source)
    found = [(token, refs.split(" | ")) for source, _, refs in rows for token in tokens(source)
             if token.kind == "word" and not token.first and cased(token.text[0]) and token.text[0].isupper()]
    kept = [any(contains(ref, token.text) for ref in refs) for token, refs in found]
    print(f"   capitalized words inside the {len(rows)} test sentences: {len(found)}, the references keep "
          f"{sum(kept)} verbatim")
    for label, rule in (("slots by the rule", slots), ("slots by the rule before", before)):
        chosen = [rule.is_slot(token) for token, _ in found]
        both, left = sum(c and k for c, k in zip(chosen, kept)), sum(k and not c for c, k in zip(chosen, kept))
        print(f"      {label:26s} {sum(chosen):5d}, kept by the references {both}; words the references keep "
              f"left to the model: {left}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("run", help="a run folder (or one of its checkpoints)")
    parser.add_argument("--show", type=int, default=0, help="print the first N misses of each kind")
    args = parser.parse_args()
    from model.inference.translator import Translator  # after the arguments: --help stays instant

    translator = Translator.load(args.run)
    checked = cases()
    results = translator.translate([case.sentence for case in checked])
    translations = [t.text for t in results]
    print(f"{args.run}: translations holding what they must ({translator.settings.search})")
    for kind, (copied, total) in copy_shares(checked, translations).items():
        print(f"   {kind:26s} {copied:4d} / {total:<4d} {copied / total:6.1%}")
        misses = [(c, t) for c, t in zip(checked, translations) if c.kind == kind and not holds(c, t)]
        for case, translation in misses[: args.show]:
            print(f"      {case.sentence}  →  {translation}")
    slots = translator.tokenizer.slots
    if slots is None:
        return
    whole = [(t.sentences[0], case) for t, case in zip(results, checked) if len(t.sentences) == 1]  # one sentence
    with_tokens = translator.tokenizer.decode_tgt([sentence.output_ids for sentence, _ in whole])  # slots not filled in
    fixed = sum(slots.repaired(text, slots.entities(case.sentence), case.sentence) != text
                for text, (_, case) in zip(with_tokens, whole))
    print(f"   translations that dropped or repeated a slot, put right: {fixed} of {len(checked)}")
    if (translator.files.folder / "test_translations.tsv").is_file():
        inside_words(translator.files.folder, slots)


if __name__ == "__main__":
    main()
