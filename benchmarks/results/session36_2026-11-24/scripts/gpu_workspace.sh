#!/usr/bin/env bash
# Session 36, call 13: the split's cached partials workspace. The -m gpu split tests (the
# four-streams-and-a-graph one included) in 12 shards, numerics on CUDA, and the decode-rows
# probe again (host time per call; GPU time under CUDA graphs).
set -uo pipefail
mkdir -p "$OUT/t"
OUT="$OUT/t" MARK=gpu timeout 200 python benchmarks/gpu_tests_parallel.py 12 split tests/test_softmax_gpu.py -k "split or persistent or one_launch or paired or graph or stream" > "$OUT/gpu_tests.txt" 2>&1
echo "gpu split tests rc=$?"; tail -1 "$OUT/gpu_tests.txt"
timeout 150 python -m pytest -q -p no:cacheprovider tests/test_softmax_numerics.py tests/test_backward_plans.py > "$OUT/numerics_cuda.txt" 2>&1
echo "numerics + backward plans on CUDA: $(tail -1 "$OUT/numerics_cuda.txt")"
timeout 200 python benchmarks/results/session36_2026-11-24/scripts/decode_rows_probe.py 2>&1 | grep -v "Warning\|ref_ok ="
