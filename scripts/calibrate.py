"""Set a run's confidence marks from its validation split, and say how well they tell bad test translations.

    python scripts/calibrate.py outputs/my_run                 # writes outputs/my_run/confidence.json
    python scripts/calibrate.py outputs/my_run --no-test       # the marks only
    python scripts/calibrate.py outputs/my_run --engine ctranslate2

Training writes ``confidence.json`` itself; this is for a run from before, a broken file, another engine or another
search (the marks are set for the run's beam). The quality (AUROC, precision and recall against sentence chrF < 30)
is printed and kept in ``test_metrics.json``.
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import asdict
from pathlib import Path

from hydra.utils import instantiate
from omegaconf import OmegaConf

from data.atomic_file import write_text_atomically
from model.inference.run_folder import RunLoadError
from model.inference.translator import Translator
from model.scoring.confidence_report import (CALIBRATION_SENTENCES, calibration_from, save_calibration,
                                             translations_quality)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("run", type=Path, help="a trained run folder")
    parser.add_argument("--engine", default="ours", help="ours | ctranslate2 (as translate.py engine=)")
    parser.add_argument("--device", default="auto")
    parser.add_argument("--sentences", type=int, default=CALIBRATION_SENTENCES, help="validation sentences that "
                        "set the marks (their first N)")
    parser.add_argument("--test-sentences", type=int, default=None, help="test sentences scored (default: all)")
    parser.add_argument("--no-test", action="store_true", help="set the marks only, without scoring them on the "
                        "test split")
    args = parser.parse_args(argv)
    if args.sentences < 1 or (args.test_sentences is not None and args.test_sentences < 1):
        parser.error("--sentences and --test-sentences must be at least 1")
    try:
        translator = Translator.load(args.run, args.device, args.engine, calibrated=False)  # a broken one too
    except (RunLoadError, ValueError) as error:
        parser.exit(2, f"calibrate.py: {error}\n")
    folder = translator.files.folder
    if not (folder / "config.yaml").is_file():
        parser.exit(2, f"calibrate.py: {folder} holds no config.yaml: its splits cannot be rebuilt\n")
    datamodule = instantiate(OmegaConf.load(folder / "config.yaml").data, _convert_="all")  # the run's own splits
    datamodule.prepare_data()
    datamodule.setup()
    translator.calibration = calibration_from(translator, datamodule.sources("validation")[: args.sentences])
    if translator.calibration is None:
        parser.exit(2, f"calibrate.py: no validation sentences, or engine={args.engine} gives no scores\n")
    save_calibration(folder, translator.calibration)
    print(f"{folder / 'confidence.json'}: {json.dumps(asdict(translator.calibration))}")
    if args.no_test:
        return 0
    test = datamodule.sources("test")[: args.test_sentences]
    quality = translations_quality(translator.translate(test), datamodule.references("test"),
                                   translator.settings.pair.target)
    print(json.dumps(quality, indent=2))
    metrics = folder / "test_metrics.json"
    if metrics.is_file():
        write_text_atomically(metrics, json.dumps({**json.loads(metrics.read_text(encoding="utf-8")),
                                                   "confidence": quality}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
