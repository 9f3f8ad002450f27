#!/usr/bin/env bash
# One device call: every -m gpu test in 14 parallel shards, then random public-API cases
# (the twenty-fourth session's fuzz_api.py, unchanged) with default configs. Logs under $OUT.  usage: gpu_check.sh N_SOFT N_ATT SEED
set -uo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > "$OUT/device.txt"
python -c "import torch, triton; print(torch.__version__, triton.__version__)" >> "$OUT/device.txt"
git rev-parse HEAD >> "$OUT/device.txt" 2>/dev/null || true
mkdir -p "$OUT/t"
OUT="$OUT/t" MARK=gpu timeout 420 python benchmarks/gpu_tests_parallel.py 14 TAG tests/ > "$OUT/gpu_tests.txt" 2>&1
echo "gpu tests rc=$?"
tail -5 "$OUT/gpu_tests.txt"
timeout 300 python "$HERE/../../session24_2026-11-23/scripts/fuzz_api.py" "$1" "$2" "$3" > "$OUT/fuzz_stdout.txt" 2>&1
echo "fuzz rc=$?"
tail -6 "$OUT/fuzz_api.log"
cat "$OUT/device.txt"
