"""The GPU check's one answer: ``scripts/gpu_check.sh`` runs this last, whatever happened before it; it prints one
JSON (also ``CHECK_DIR/gpu_check.json``) from what the runs left behind, naming what is missing and why.

    python scripts/gpu_check_report.py CHECK_DIR --stage train=0 --stage cuda_tests=0 --minutes 3
    python scripts/gpu_check_report.py --missing      # one line: the packages train.py needs and lacks

Standard library only (torch where it imports), so that it answers on a machine that lacks the rest.
"""

from __future__ import annotations

import argparse
import csv
import datetime
import importlib.util
import json
import sys
from pathlib import Path

# import name -> package name: what train.py imports, directly or through datasets and hydra
NEEDED = {"torch": "torch", "lightning": "lightning", "hydra": "hydra-core", "omegaconf": "omegaconf",
          "antlr4": "antlr4-python3-runtime", "datasets": "datasets", "dill": "dill", "multiprocess": "multiprocess",
          "wandb": "wandb", "tokenizers": "tokenizers", "sacrebleu": "sacrebleu", "matplotlib": "matplotlib",
          "filelock": "filelock"}
# each target: its name, the figure it reads, and what that figure must be
TARGETS = {"steps >= 90% of the wall": ("share_in_steps", lambda v: v >= 0.90),
           "GPU busy >= 80% of a step": ("gpu_busy_share", lambda v: v >= 0.80),
           "no host sync off logging steps": ("host_syncs_off_logging_steps", lambda v: v == 0),
           "test BLEU >= 55": ("test_bleu", lambda v: v >= 55.0)}


def missing_packages() -> list[str]:
    return [package for module, package in NEEDED.items() if importlib.util.find_spec(module) is None]


def read_json(path: Path, missing: list[str]) -> dict:
    """The file's JSON, or {} with a line in ``missing`` saying why not."""
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError) as error:
        missing.append(f"{path}: {type(error).__name__}: {getattr(error, 'strerror', None) or error}")
        return {}


def as_float(value: str | None) -> float | None:
    try:
        return float(value)
    except (TypeError, ValueError):
        return None


def read_metrics(run: Path) -> list[dict[str, float]]:
    """Rows of the run's ``metrics.csv`` (Lightning's CSVLogger), values as floats, empty or unreadable cells
    dropped: whatever the run left (``compare_runs.py`` and ``benchmark.py`` read it here too)."""
    rows = []
    for path in sorted(run.glob("csv/version_*/metrics.csv")):
        with open(path, encoding="utf-8") as f:
            rows += [{k: x for k, v in row.items() if (x := as_float(v)) is not None} for row in csv.DictReader(f)]
    return rows


def validation_curve(run: Path) -> list[dict]:
    """(step, minutes, loss, BLEU) at each validation that logged them, from Lightning's CSV logs."""
    names = {"val/bleu": "val_bleu", "val/minutes": "minutes"}
    return [{"step": int(row["step"]), "val_loss": round(row["val/loss"], 4)}
            | {name: round(row[key], 2) for key, name in names.items() if key in row}
            for row in read_metrics(run) if "val/loss" in row]


def run_figures(run: Path, missing: list[str]) -> dict:
    """A training run's figures: time split, step probe, validation curve, test scores."""
    split, probe = read_json(run / "time_split.json", missing), read_json(run / "step_probe.json", missing)
    figures = {"wall_s": split.get("wall_s"), "steps": split.get("steps"),
               "share_in_steps": split.get("share", {}).get("steps"), "shares": split.get("share"),
               "tokens_per_s_steps": split.get("tokens_per_s_steps"),
               "tokens_per_s_wall": split.get("tokens_per_s_wall")}
    figures |= {key: value for key, value in probe.items() if key != "start_step"}
    curve = validation_curve(run)
    bleus = [point["val_bleu"] for point in curve if "val_bleu" in point]
    figures |= {"validation": curve, "best_val_bleu": max(bleus, default=None),
                "final_val_bleu": bleus[-1] if bleus else None}
    if (run / "test_metrics.json").is_file() or split:  # a run that got as far as training
        test = read_json(run / "test_metrics.json", missing)
        figures |= {"test_bleu": test.get("bleu"), "test_chrf": test.get("chrf")}
    return figures


def verdicts(train: dict) -> dict:
    """Each target: true, false, or null where its figure is missing (then the figure's entry says why)."""
    numbers = {key: value for key, value in train.items()
               if isinstance(value, (int, float)) and not isinstance(value, bool)}
    return {name: good(numbers[key]) if key in numbers else None for name, (key, good) in TARGETS.items()}


def report(folder: Path, stages: dict[str, str], minutes: float | None) -> dict:
    missing: list[str] = []
    try:
        import torch

        gpu, torch_version = (torch.cuda.get_device_name() if torch.cuda.is_available() else None), torch.__version__
    except ImportError:
        gpu = torch_version = None
    result = {"gpu": gpu, "torch": torch_version, "date": datetime.date.today().isoformat(),
              "missing_packages": missing_packages(), "exit_codes": stages, "minutes_of_training": minutes}
    if (folder / "train").is_dir():
        result["train"] = run_figures(folder / "train", missing)
    else:
        missing.append(f"{folder / 'train'}: no run folder (train exit {stages.get('train', 'not run')})")
    result["targets"] = verdicts(result.get("train", {}))
    if (folder / "double_batch").is_dir():
        double = run_figures(folder / "double_batch", missing)
        result["double_batch"] = {key: double.get(key) for key in ("steps", "tokens_per_s_steps",
                                                                   "steps_per_s", "peak_memory_gib")}
    result["missing"] = missing
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folder", nargs="?", type=Path, help="the check's folder (train/, double_batch/)")
    parser.add_argument("--stage", action="append", default=[], metavar="NAME=CODE", help="a stage's exit code")
    parser.add_argument("--minutes", type=float, default=None, help="minutes of training the check asked for")
    parser.add_argument("--missing", action="store_true", help="print the missing packages in one line and exit")
    args = parser.parse_args(argv)
    if args.missing:
        lacking = missing_packages()
        print(f"missing packages: {', '.join(lacking)} (pip install them, or carry their wheels)" if lacking
              else "packages: all that train.py needs are installed")
        return 1 if lacking else 0
    stages = dict(stage.split("=", 1) for stage in args.stage)
    result = report(args.folder, stages, args.minutes)
    text = json.dumps(result, indent=2)
    try:
        args.folder.mkdir(parents=True, exist_ok=True)
        (args.folder / "gpu_check.json").write_text(text + "\n")
    except OSError as error:
        result["missing"].append(f"{args.folder / 'gpu_check.json'}: not written: {error.strerror}")
        text = json.dumps(result, indent=2)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
