#!/usr/bin/env bash
# One device call: every -m gpu test in 14 parallel shards, then ab_attention.sh (the attention
# template before and after the +inf-LSE change). Logs under $OUT.
set -uo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > "$OUT/device.txt"
python -c "import torch, triton; print(torch.__version__, triton.__version__)" >> "$OUT/device.txt"
mkdir -p "$OUT/t"
OUT="$OUT/t" MARK=gpu timeout 420 python benchmarks/gpu_tests_parallel.py 14 TAG tests/ > "$OUT/gpu_tests.txt" 2>&1
echo "gpu tests rc=$?"
tail -4 "$OUT/gpu_tests.txt"
timeout 260 bash "$HERE/ab_attention.sh"
cat "$OUT/device.txt"
