#!/usr/bin/env bash
# Session 36, call 3: see gpu_final.sh.
set -uo pipefail
S24=benchmarks/results/session24_2026-11-23/scripts
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > "$OUT/device.txt"
python -c "import torch, triton; print(torch.__version__, triton.__version__)" >> "$OUT/device.txt"
cat "$OUT/device.txt"
timeout 200 python -m pytest -q -p no:cacheprovider -m gpu tests/test_ops.py tests/test_dispatch.py > "$OUT/gpu_ops_dispatch.txt" 2>&1
echo "-m gpu test_ops/test_dispatch: $(tail -1 "$OUT/gpu_ops_dispatch.txt")"
mkdir -p "$OUT/fuzz"
OUT="$OUT/fuzz" timeout 150 python $S24/fuzz_api.py 150 60 3601 > "$OUT/fuzz/stdout.txt" 2>&1
echo "fuzz rc=$?"; tail -4 "$OUT/fuzz/fuzz_api.log"
