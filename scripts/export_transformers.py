"""Export a trained run as a `transformers` folder with its model card (``pip install -e ".[hub]"``).

    python scripts/export_transformers.py outputs/my_run                  # -> outputs/my_run/transformers
    python scripts/export_transformers.py outputs/my_run /tmp/en-es
    python translate.py run=outputs/my_run engine=transformers "I like cats."

The folder loads with ``AutoModelForSeq2SeqLM.from_pretrained`` and ``AutoTokenizer.from_pretrained``
without this project; ``huggingface-cli upload <user>/<name> <folder>`` puts it on the Hub. What
Pegasus cannot express (post-norm, learned or no positions, separate vocabularies, no cross-attention,
no causal mask) is refused in one line before anything is written. See
``model/inference/export_transformers.py``.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("run", help="a run folder made by train.py, or a .ckpt file inside one")
    parser.add_argument("out", nargs="?", help="the folder to write (default: RUN/transformers)")
    args = parser.parse_args()
    from model.inference.export_transformers import export_transformers  # after the arguments: --help is instant
    from model.inference.run_folder import RunLoadError
    from model.inference.translator import Translator

    try:
        run = Translator.load(args.run, device="cpu")
        folder = Path(args.out) if args.out else run.files.folder / "transformers"
        export_transformers(run.model, run.tokenizer, run.settings, run.files.checkpoint, folder)
    except (RunLoadError, ImportError) as error:
        print(f"export_transformers.py: {error}", file=sys.stderr)
        return 1
    print(f"wrote {folder}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
