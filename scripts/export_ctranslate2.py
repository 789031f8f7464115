"""Export a trained run to a CTranslate2 model folder (``pip install -e ".[export]"``).

    python scripts/export_ctranslate2.py outputs/my_run                         # -> outputs/my_run/ctranslate2
    python scripts/export_ctranslate2.py outputs/my_run /tmp/model_int8 --quantization int8
    python translate.py run=outputs/my_run engine=ctranslate2 "I like cats."

What cannot be converted (no cross-attention, no positions, separate vocabularies) is refused in
one line before anything is written. See ``model/inference/export.py``.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from model.inference.export import QUANTIZATIONS, export_ctranslate2
from model.inference.run_folder import RunLoadError
from model.inference.translator import Translator


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("run", help="a run folder made by train.py, or a .ckpt file inside one")
    parser.add_argument("out", nargs="?", help="the folder to write (default: RUN/ctranslate2)")
    parser.add_argument("--quantization", default="float32", choices=QUANTIZATIONS,
                        help="weights' type in the folder (int8: 4x smaller, faster on a CPU)")
    args = parser.parse_args()
    try:
        run = Translator.load(args.run, device="cpu")
        folder = Path(args.out) if args.out else run.files.folder / "ctranslate2"
        export_ctranslate2(run.model, run.tokenizer, run.files.checkpoint, folder, args.quantization)
    except RunLoadError as error:
        print(f"export_ctranslate2.py: {error}", file=sys.stderr)
        return 1
    print(f"wrote {folder}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
