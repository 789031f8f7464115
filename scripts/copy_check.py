"""How well a run copies what must pass through a translation unchanged: names and numbers.

    python scripts/copy_check.py outputs/my_run                # 480 sentences, seconds
    python scripts/copy_check.py outputs/my_run --show 5       # and the first misses of each kind

Translates the sentences of ``data/copy_cases.py`` (people, towns and companies from many languages
that the corpus never holds; numbers of 1 to 7 digits, years, prices, times, phone numbers) with the
run's own search and prints, per kind, the share whose entity is found verbatim in the translation.
A run's ``test_metrics.json`` holds the same shares (``copied``).
"""

from __future__ import annotations

import argparse

from data.copy_cases import cases, copy_shares
from data.copy_slots import contains


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("run", help="a run folder (or one of its checkpoints)")
    parser.add_argument("--show", type=int, default=0, help="print the first N misses of each kind")
    args = parser.parse_args()
    from model.inference.translator import Translator  # after the arguments: --help stays instant

    translator = Translator.load(args.run)
    checked = cases()
    translations = [t.text for t in translator.translate([case.sentence for case in checked])]
    print(f"{args.run}: entities found verbatim in the translation ({translator.settings.search})")
    for kind, (copied, total) in copy_shares(checked, translations).items():
        print(f"   {kind:22s} {copied:4d} / {total:<4d} {copied / total:6.1%}")
        misses = [(c, t) for c, t in zip(checked, translations) if c.kind == kind and not contains(t, c.entity)]
        for case, translation in misses[: args.show]:
            print(f"      {case.sentence}  →  {translation}")


if __name__ == "__main__":
    main()
