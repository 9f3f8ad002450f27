#!/usr/bin/env bash
# Session 32, one device call on an H200: the softmax benchmark set's numbers had not been taken
# on an H200 since session 20. Tune the default softmax set (6 trials per problem, as README's
# H200 timing), then `flashtune bench --ops softmax` with those winners. The tree carries the
# enable_fp_fusion=True launches (c4a5739), so this also compiles them on Triton 3.6.
set -uo pipefail
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > "$OUT/device.txt"
python -c "import torch, triton; print(torch.__version__, triton.__version__)" >> "$OUT/device.txt"
mkdir -p "$OUT/bench"
timeout 250 python -m flashtune tune --db "sqlite:///$OUT/tuned.sqlite" --ops softmax --trials 6 \
  > "$OUT/tune.txt" 2>&1
echo "tune rc=$?"; tail -5 "$OUT/tune.txt"
timeout 300 python -m flashtune bench --ops softmax --db "sqlite:///$OUT/tuned.sqlite" --budget 280 \
  --no-overhead --out "$OUT/bench" > "$OUT/bench_stdout.txt" 2>&1
echo "bench rc=$?"
tail -40 "$OUT/bench_stdout.txt"
cat "$OUT/device.txt"
