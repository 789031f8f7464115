"""How well a run copies what must pass through unchanged (names, numbers, codes), and translates the rest.

    python scripts/copy_check.py outputs/my_run                # 661 sentences, seconds
    python scripts/copy_check.py outputs/my_run --show 5       # and the first misses of each kind

Translates the sentences of ``data/copy_cases.py`` with the run's own search and prints, per kind, the share whose
translation holds what it must (a run's ``test_metrics.json`` holds the same: ``copied``).
"""

from __future__ import annotations

import argparse

from data.copy_cases import cases, copy_shares, holds


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


if __name__ == "__main__":
    main()
