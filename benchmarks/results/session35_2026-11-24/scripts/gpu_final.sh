#!/usr/bin/env bash
# Session 35's last device call, on the final tree: the numerics tests on CUDA (the long-row
# accuracy cases, split included), session 24's random public-API cases with default configs,
# and session 24's tune-then-fuzz (a tune into an empty database, then random cases near the
# tuned problems, served by the new winners: the softmax family hash changed this session).
set -uo pipefail
S24=benchmarks/results/session24_2026-11-23/scripts
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > "$OUT/device.txt"
python -c "import torch, triton; print(torch.__version__, triton.__version__)" >> "$OUT/device.txt"
mkdir -p "$OUT/fuzz" "$OUT/tuned"
timeout 200 python -m pytest -q -p no:cacheprovider tests/test_softmax_numerics.py > "$OUT/numerics_cuda.txt" 2>&1 &
OUT="$OUT/fuzz" timeout 230 python $S24/fuzz_api.py 240 60 3501 > "$OUT/fuzz/stdout.txt" 2>&1
echo "fuzz rc=$?"; tail -6 "$OUT/fuzz/fuzz_api.log"
wait
echo "numerics on CUDA:"; tail -1 "$OUT/numerics_cuda.txt"
OUT="$OUT/tuned" timeout 300 bash $S24/tune_then_fuzz.sh 120 30 3502
