#!/usr/bin/env bash
# The GPU check, in about 8 minutes on one GPU (an H100/H200), as one script:
#   1. the tests that touch CUDA (tests/test_cuda.py: fused kernels, bf16, search, no host sync in a step,
#      a smoke run with its time split);
#   2. `python train.py` as a user with a GPU types it (the GPU recipe, picked by itself), cut to
#      $MINUTES minutes of training, then the test split with beam search;
#   3. one JSON file with the GPU, the time split, tokens/s, MFU and BLEU, printed at the end.
#
#   bash scripts/gpu_check.sh [RUN_DIR]          # default RUN_DIR: outputs/gpu_check; MINUTES=5
#
# Needs the project installed with a CUDA build of torch, and the corpus where train.py finds it
# (../shared/data/spa-eng.zip, or SPA_ENG_DATA=/path/to/spa-eng.zip). logger=csv: no wandb needed.
# The full 10-minute recipe: python train.py
set -euo pipefail
cd "$(dirname "$0")/.."
run_dir="${1:-outputs/gpu_check}"
minutes="${MINUTES:-5}"
export PYTHONUNBUFFERED=1 WANDB_MODE="${WANDB_MODE:-offline}"

python -c 'import torch; assert torch.cuda.is_available(), "no GPU visible to torch"; print(torch.__version__, torch.cuda.get_device_name())'
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader || true

echo "== 1. tests that touch CUDA"
python -m pytest -m cuda tests/test_cuda.py -p no:warnings || echo "CUDA TESTS FAILED (the run goes on)"

echo "== 2. python train.py (the GPU recipe), $minutes minutes of training -> $run_dir"
rm -rf "$run_dir"
python train.py trainer.max_time="00:00:$(printf %02d "$minutes"):00" logger=csv hydra.run.dir="$run_dir" 2>&1 \
  | grep -v "it/s" | tail -n 30

echo "== 3. the figures -> $run_dir/gpu_check.json"
python - "$run_dir" <<'EOF'
import csv, json, sys
from pathlib import Path

import torch

run = Path(sys.argv[1])
test = json.loads((run / "test_metrics.json").read_text())
rows = []
for path in run.glob("csv/version_*/metrics.csv"):
    rows += list(csv.DictReader(path.open()))
validation = [(int(r["step"]), round(float(r["val/bleu"]), 2), round(float(r["val/minutes"]), 2))
              for r in rows if r.get("val/bleu") and r.get("val/minutes")]
figures = {
    "gpu": torch.cuda.get_device_name(), "torch": torch.__version__,
    "test_bleu": round(test["bleu"], 2), "test_chrf": round(test["chrf"], 2),
    "validation_bleu_reached": test.get("validation_bleu_reached"),
    "validation (step, bleu, minutes)": validation,
    "time_split": test["time_split"],
}
(run / "gpu_check.json").write_text(json.dumps(figures, indent=2))
print(json.dumps(figures, indent=2))
EOF
