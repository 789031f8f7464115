"""Export a trained run for another engine: a CTranslate2 model folder or a `transformers` folder with its model card.

    python scripts/export.py outputs/my_run                                  # -> outputs/my_run/ctranslate2
    python scripts/export.py outputs/my_run /tmp/model_int8 --quantization int8
    python scripts/export.py outputs/my_run --to transformers               # -> outputs/my_run/transformers
    python translate.py run=outputs/my_run engine=transformers "I like cats."

Needs ``pip install -e ".[export]"`` (CTranslate2) or ``".[hub]"`` (transformers; ``hf upload <user>/<name>
<folder>`` puts the folder on the Hub). What the engine cannot express is refused in one line, nothing written.
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
    parser.add_argument("out", nargs="?", help="the folder to write (default: RUN/ctranslate2 or RUN/transformers)")
    parser.add_argument("--to", default="ctranslate2", choices=("ctranslate2", "transformers"), help="the engine")
    parser.add_argument("--quantization", default="float32", choices=QUANTIZATIONS,
                        help="CTranslate2 weights' type (int8: 4x smaller, faster on a CPU)")
    args = parser.parse_args()
    try:
        run = Translator.load(args.run, device="cpu")
        folder = Path(args.out) if args.out else run.files.folder / args.to
        if args.to == "ctranslate2":
            export_ctranslate2(run.model, run.tokenizer, run.files.checkpoint, folder, args.quantization,
                               run.settings.pair, run.aligned)
        else:
            from model.inference.export_transformers import export_transformers

            export_transformers(run.model, run.tokenizer, run.settings, run.files.checkpoint, folder)
    except (RunLoadError, ImportError) as error:
        print(f"export.py: {error}", file=sys.stderr)
        return 1
    print(f"wrote {folder}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
