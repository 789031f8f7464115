#!/usr/bin/env bash
# The GPU checks, in under 5 minutes on one GPU (an H100/H200):
#   1. the tests that touch CUDA (tests/test_cuda.py: fused kernels, bf16 autocast, search, a smoke run);
#   2. a 3-minute `experiment=gpu_base` run (no test split: the validation BLEU is the check);
#   3. its tokens/s and validation BLEU, from the run folder (scripts/compare_runs.py).
#
#   bash scripts/gpu_check.sh [RUN_DIR]        # default RUN_DIR: outputs/gpu_check
#
# Needs the project installed with a CUDA build of torch, and the corpus where train.py finds it
# (../shared/data/spa-eng.zip, or SPA_ENG_DATA=/path/to/spa-eng.zip). The full 10-minute preset:
#   python train.py experiment=gpu_base
set -euo pipefail
cd "$(dirname "$0")/.."
run_dir="${1:-outputs/gpu_check}"
export PYTHONUNBUFFERED=1 WANDB_MODE="${WANDB_MODE:-offline}"

python -c 'import torch; assert torch.cuda.is_available(), "no GPU visible to torch"; print(torch.__version__, torch.cuda.get_device_name())'
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader || true

echo "== 1. tests that touch CUDA"
python -m pytest -m cuda tests/test_cuda.py

echo "== 2. experiment=gpu_base for 3 minutes -> $run_dir"
rm -rf "$run_dir"
python train.py experiment=gpu_base trainer.max_time=00:00:03:00 trainer.val_check_interval=250 test=false \
  logger=csv hydra.run.dir="$run_dir" 2>&1 | grep -v "it/s" | tail -n 25

echo "== 3. tokens/s and validation BLEU"
python scripts/compare_runs.py "$run_dir" --out "$run_dir/compare"
