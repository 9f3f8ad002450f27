#!/usr/bin/env bash
# Session 38, call 1: strided views' grain. Timings first (view_grain_probe.py, the GPU
# otherwise idle), then the new tests on CUDA tensors and the -m gpu softmax matrix.
set -uo pipefail
S=benchmarks/results/session38_2026-11-24/scripts
DTYPES=${DTYPES:-float16,float32} OUT=$OUT timeout 240 python $S/view_grain_probe.py 2>&1 | grep -v "Warning\|warn_once"
timeout 120 python -m pytest -q -p no:cacheprovider tests/test_view_grain.py tests/test_backward_plans.py 2>&1 | tail -2
mkdir -p "$OUT/t"
OUT="$OUT/t" MARK=gpu timeout 200 python benchmarks/gpu_tests_parallel.py 12 gpu tests/test_softmax_gpu.py > "$OUT/gpu_tests.txt" 2>&1
echo "gpu softmax tests rc=$?"; tail -3 "$OUT/gpu_tests.txt"
