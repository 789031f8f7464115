#!/usr/bin/env bash
# The GPU check: one call, 9 to 10 minutes on one H200, and it always ends with one JSON
# (CHECK_DIR/gpu_check.json, printed last), whatever failed or was cut short before it:
#   0. which of the packages train.py needs are missing (one line);
#   1. the quick CUDA tests (tests/test_cuda.py -m "cuda and not slow": kernels, bf16, search, no host
#      sync in a step), at most 3 minutes;
#   2. `python train.py` as a user with a GPU types it (the GPU recipe, picked by itself), cut to
#      $MINUTES minutes of training, validation (loss and greedy BLEU) every 500 steps, then the test
#      split; the step probe (scripts/step_probe.py) measures the share of a step the GPU is
#      busy and counts host syncs on non-logging steps;
#   3. 30 seconds at twice the recipe's data.max_tokens (tokens/s, peak memory);
#   4. the report (scripts/gpu_check_report.py): exit codes, time split, probe, validation curve,
#      test BLEU, targets met or not, and what is missing and why.
#
#   bash scripts/gpu_check.sh [CHECK_DIR] [train.py overrides ...]     # default CHECK_DIR: outputs/gpu_check
#   MINUTES=10 bash scripts/gpu_check.sh                                # the recipe's full 10 minutes
#
# The corpus: SPA_ENG_DATA=/path/to/spa-eng.zip (e.g. a copy inside the checkout, which git ignores),
# else where train.py looks. logger=csv: no wandb account needed. Every stage runs under `timeout`.
set -uo pipefail
cd "$(dirname "$0")/.."
check_dir="${1:-outputs/gpu_check}"
shift $(( $# > 0 ? 1 : 0 ))
minutes="${MINUTES:-3}"
train_timeout="${TRAIN_TIMEOUT:-$(( minutes * 60 + 240 ))}"  # data, training, test, views' wait
export PYTHONUNBUFFERED=1 WANDB_MODE="${WANDB_MODE:-offline}"
mkdir -p "$check_dir" && rm -rf "$check_dir/train" "$check_dir/double_batch"
stages=()

echo "== 0. packages"
python scripts/gpu_check_report.py --missing
gpu=$(python -c 'import torch; print(torch.cuda.is_available())' 2>/dev/null || echo False)
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader 2>/dev/null

echo "== 1. quick CUDA tests"
if [ "$gpu" = True ]; then
  timeout -k 10 180 python -m pytest -n 0 -m "cuda and not slow" tests/test_cuda.py -p no:warnings -q  # one process: one GPU
  stages+=("--stage" "cuda_tests=$?")
else
  echo "no CUDA device: skipped"; stages+=("--stage" "cuda_tests=skipped: no CUDA device")
fi

echo "== 2. python train.py, $minutes minutes of training -> $check_dir/train"
probe='+callbacks.step_probe={_target_:scripts.step_probe.StepProbe,start_step:200}'
timeout -k 60 "$train_timeout" python train.py runtime.max_time="00:00:$(printf %02d "$minutes"):00" logger=csv \
  trainer.val_check_interval=500 module.val_bleu_every=1 "$probe" hydra.run.dir="$check_dir/train" "$@" 2>&1 \
  | grep -v "it/s" | tail -n 25
stages+=("--stage" "train=${PIPESTATUS[0]}")

echo "== 3. 30 seconds at twice data.max_tokens -> $check_dir/double_batch"
if [ "$gpu" = True ]; then
  max_tokens=$(python train.py --cfg job "$@" 2>/dev/null | awk '/^data:/{d=1} d && /max_tokens:/{print $2; exit}')
  timeout -k 30 150 python train.py runtime.max_time=00:00:00:30 logger=csv test=false \
    data.max_tokens=$(( ${max_tokens:-16384} * 2 )) callbacks.attention_views.sentences=0 \
    '+callbacks.step_probe={_target_:scripts.step_probe.StepProbe,start_step:50,sync_steps:0}' \
    hydra.run.dir="$check_dir/double_batch" "$@" 2>&1 | grep -v "it/s" | tail -n 3
  stages+=("--stage" "double_batch=${PIPESTATUS[0]}")
else
  stages+=("--stage" "double_batch=skipped: no CUDA device")
fi

echo "== 4. the figures -> $check_dir/gpu_check.json"
python scripts/gpu_check_report.py "$check_dir" --minutes "$minutes" "${stages[@]}"
