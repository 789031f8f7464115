"""Compare training runs side by side: one table (Markdown + CSV) and one plot of validation BLEU.

    python scripts/compare_runs.py multirun/2026-11-30_08-20-00           # every run of a sweep
    python scripts/compare_runs.py outputs/default_run outputs/my_run --out /tmp/compare
    python scripts/compare_runs.py multirun/... --wandb                    # also a wandb Table

A run is a folder made by ``train.py`` (with ``config.yaml``); a sweep folder holds runs. Writes to ``--out`` (default:
the first folder) ``comparison.md`` and ``.csv`` (the settings that differ, the minutes and steps to validation BLEU
30 and 40: "~" estimated from the steps), ``val_bleu.png`` and ``time_split.md`` (``time_split.json``'s shares).
"""

from __future__ import annotations

import argparse
import csv
import json
import statistics
from pathlib import Path

from omegaconf import OmegaConf

from gpu_check_report import read_metrics  # scripts/gpu_check_report.py, beside this file

MARKS = (30, 40)  # validation BLEU marks for the time-to-quality columns
COLUMNS = ["variant", "params (M)", "steps", "tokens/s", "best val BLEU", "best val chrF", "test BLEU", "minutes",
           *[f"{what} to {mark}" for mark in MARKS for what in ("minutes", "steps")]]
SPLIT_COLUMNS = ["variant", "wall min", "steps", "validation", "views", "checkpoints", "data", "test",
                 "rest", "tokens/s (steps)", "tokens/s (wall)"]


def time_split_row(run: Path, variant: str) -> dict[str, object] | None:
    """One row of the time-split table, or None for a run without ``time_split.json``."""
    path = run / "time_split.json"
    if not path.is_file():
        return None
    split = json.loads(path.read_text())
    return dict.fromkeys(SPLIT_COLUMNS, "") | {  # "": a phase the run did not record (older runs)
        "variant": variant or run.name, "wall min": round(split["wall_s"] / 60, 1),
        **{phase: f"{100 * share:.1f}%" for phase, share in split["share"].items()},
        "tokens/s (steps)": round(split["tokens_per_s_steps"] or 0),
        "tokens/s (wall)": round(split["tokens_per_s_wall"] or 0)}


def find_runs(folders: list[Path]) -> list[Path]:
    """Run folders (holding ``config.yaml``) given directly or found below sweep folders."""
    runs = []
    for folder in folders:
        found = [folder] if (folder / "config.yaml").is_file() else sorted(
            p.parent for p in folder.rglob("config.yaml") if p.parent.name != ".hydra")
        runs += [run for run in found if run not in runs]
    return runs


def flatten(config: dict, prefix: str = "") -> dict[str, object]:
    """{"model": {"d_model": 256}} -> {"model.d_model": 256}."""
    flat = {}
    for key, value in config.items():
        if isinstance(value, dict):
            flat |= flatten(value, f"{prefix}{key}.")
        else:
            flat[f"{prefix}{key}"] = value
    return flat


IGNORED = ("paths.", "data.cache_dir", "ckpt_path", "logger.", "callbacks.", "hydra.")


def variants(configs: list[dict], overrides: list[list[str]] | None = None) -> list[str]:
    """For each run, what differs between the runs: the command-line overrides that not every run
    shares (Hydra's ``.hydra/overrides.yaml``), else the settings; all equal: empty."""
    if overrides is not None:
        differing = [[o for o in own if not o.startswith("hydra.") and not all(o in other for other in overrides)]
                     for own in overrides]
        if any(differing):
            return [" ".join(d) for d in differing]
    flats = [flatten(c) for c in configs]
    keys = sorted({k for f in flats for k in f if not k.startswith(IGNORED)})
    differing = [k for k in keys if len({json.dumps(f.get(k), sort_keys=True) for f in flats}) > 1]
    return [" ".join(f"{k}={f.get(k)}" for k in differing) for f in flats]


def summarize(run: Path, variant: str) -> tuple[dict[str, object], list[tuple[float, float]]]:
    """One table row, and the (minutes, validation BLEU) curve of ``run``."""
    config = OmegaConf.to_container(OmegaConf.load(run / "config.yaml"))
    rows = read_metrics(run)
    steps = final_step(run) or int(max((r["step"] for r in rows if "step" in r), default=-1)) + 1
    speeds = [r["train/tokens_per_s"] for r in rows if "train/tokens_per_s" in r and r.get("step", 0) >= 30]
    val = [(int(r["step"]) + 1, r["val/bleu"], r.get("val/chrf", float("nan")), r.get("val/minutes"))
           for r in rows if "val/bleu" in r]
    ends = [p.stat().st_mtime for p in (run / "checkpoints").glob("*.ckpt")]
    minutes = (max(ends) - (run / "config.yaml").stat().st_mtime) / 60 if ends else float("nan")
    test = json.loads((run / "test_metrics.json").read_text()) if (run / "test_metrics.json").is_file() else {}
    row = {
        "variant": variant or run.name,
        "params (M)": round(parameter_count(config["model"]) / 1e6, 2),
        "steps": steps,
        "tokens/s": round(statistics.median(speeds)) if speeds else "",
        "best val BLEU": round(max(b for _, b, _, _ in val), 1) if val else "",
        "best val chrF": round(max(c for _, _, c, _ in val), 1) if val else "",
        "test BLEU": round(test["bleu"], 1) if "bleu" in test else "",
        "minutes": round(minutes, 1),
    }
    per_step = minutes / steps if steps else 0.0  # older runs logged no val/minutes: spread evenly
    curve = [(at if at is not None else step * per_step, bleu) for step, bleu, _, at in val]
    for mark in MARKS:
        first = next(((step, curve[i][0], at is None) for i, (step, bleu, _, at) in enumerate(val) if bleu >= mark),
                     None)
        known = first is not None and first[1] == first[1]  # not NaN: a run without checkpoints has no estimate
        row[f"minutes to {mark}"] = f"{'~' if first[2] else ''}{first[1]:.1f}" if known else ""
        row[f"steps to {mark}"] = first[0] if first else ""
    return row, curve


def final_step(run: Path) -> int | None:
    """Optimizer steps of a finished run (its ``final.ckpt``), None if it has none."""
    import torch

    final = run / "checkpoints" / "final.ckpt"
    return torch.load(final, map_location="cpu", weights_only=True)["global_step"] if final.is_file() else None


def parameter_count(model_config: dict) -> int:
    """Parameters of the model a run's config describes (built on the meta device: no memory, no time)."""
    import torch

    from model.transformer import Seq2SeqTransformer

    with torch.device("meta"):
        model = Seq2SeqTransformer(**{k: v for k, v in model_config.items() if k != "_target_"})
    return sum(p.numel() for p in model.parameters())


def markdown(rows: list[dict[str, object]], columns: list[str] = COLUMNS) -> str:
    lines = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    lines += ["| " + " | ".join(str(row[c]) for c in columns) + " |" for row in rows]
    return "\n".join(lines) + "\n"


def plot(curves: dict[str, list[tuple[float, float]]], path: Path) -> None:
    from model.views.plotting import plt, save_figure

    fig, ax = plt.subplots(figsize=(9, 5.5), dpi=80, layout="constrained")
    for label, curve in curves.items():
        if curve:
            short = label if len(label) <= 70 else label[:67] + "..."
            ax.plot([m for m, _ in curve], [b for _, b in curve], marker="o", markersize=3, label=short)
    ax.set_xlabel("training minutes")
    ax.set_ylabel("validation BLEU (greedy)")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    save_figure(fig, path)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("folders", nargs="+", type=Path, help="run folders or sweep folders")
    parser.add_argument("--out", type=Path, default=None, help="where to write the table and plot")
    parser.add_argument("--wandb", action="store_true", help="also log the table to wandb (WANDB_MODE applies)")
    args = parser.parse_args()
    runs = find_runs(args.folders)
    if not runs:
        raise SystemExit(f"compare_runs.py: no run folder (with config.yaml) in {', '.join(map(str, args.folders))}")
    configs = [OmegaConf.to_container(OmegaConf.load(run / "config.yaml")) for run in runs]
    overrides = [run / ".hydra" / "overrides.yaml" for run in runs]
    given = [list(OmegaConf.load(p)) for p in overrides] if all(p.is_file() for p in overrides) else None
    names = variants(configs, given)
    summaries = [summarize(run, variant) for run, variant in zip(runs, names)]
    rows = [row for row, _ in summaries]
    splits = [row for row in (time_split_row(run, variant) for run, variant in zip(runs, names)) if row]
    out = args.out or args.folders[0]
    out.mkdir(parents=True, exist_ok=True)
    tables = {"comparison.md": markdown(rows)} | ({"time_split.md": markdown(splits, SPLIT_COLUMNS)} if splits else {})
    for name, table in tables.items():
        (out / name).write_text(table, encoding="utf-8")
    with open(out / "comparison.csv", "w", newline="", encoding="utf-8") as f:
        writer = csv.DictWriter(f, fieldnames=COLUMNS)
        writer.writeheader()
        writer.writerows(rows)
    plot({row["variant"]: curve for row, curve in summaries}, out / "val_bleu.png")
    if args.wandb:
        import wandb

        with wandb.init(project="attention-from-scratch", job_type="comparison", dir=str(out)) as run:
            run.log({"comparison": wandb.Table(columns=COLUMNS, data=[[row[c] for c in COLUMNS] for row in rows])})
    written = [*tables, "comparison.csv", "val_bleu.png"]
    print("\nwhere the wall time went:\n".join(tables.values()) + f"\nwritten to {out}: {', '.join(written)}")


if __name__ == "__main__":
    main()
