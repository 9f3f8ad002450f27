#!/usr/bin/env bash
# The session's last device call: every -m gpu test in 14 parallel shards, then
# `flashtune bench --quick --ops softmax,attention` (the attention rows' config column and the
# kernel loader's warnings changed after call 3).
set -uo pipefail
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > "$OUT/device.txt"
python -c "import torch, triton; print(torch.__version__, triton.__version__)" >> "$OUT/device.txt"
git log -1 --format=%h >> "$OUT/device.txt" 2>/dev/null || true
mkdir -p "$OUT/t" "$OUT/bench"
OUT="$OUT/t" MARK=gpu timeout 330 python benchmarks/gpu_tests_parallel.py 14 TAG tests/ > "$OUT/gpu_tests.txt" 2>&1
echo "gpu tests rc=$?"
tail -2 "$OUT/gpu_tests.txt"
timeout 230 python -m flashtune bench --quick --ops softmax,attention --budget 200 --no-overhead --out "$OUT/bench" > "$OUT/bench_stdout.txt" 2>&1
echo "bench rc=$?"
tail -40 "$OUT/bench_stdout.txt"
cat "$OUT/device.txt"
