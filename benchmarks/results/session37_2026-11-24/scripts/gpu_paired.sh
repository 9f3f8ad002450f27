#!/usr/bin/env bash
# Session 37, call 3: paired loads with the aligned walk (fp32 timings: split_align_probe.py),
# then every -m gpu softmax test in 12 shards.
set -uo pipefail
S=benchmarks/results/session37_2026-11-24/scripts
DTYPES=float32 SHAPES=16x1048576,16x1048575,16x1000001,4x1048573,32x524287,128x262143,64x262143,120x131071 OUT=$OUT timeout 200 python $S/split_align_probe.py 2>&1 | grep -v "Warning\|warn_once"
mkdir -p "$OUT/t"
OUT="$OUT/t" MARK=gpu timeout 330 python benchmarks/gpu_tests_parallel.py 12 gpu tests/test_softmax_gpu.py > "$OUT/gpu_tests.txt" 2>&1
echo "gpu softmax tests rc=$?"; tail -3 "$OUT/gpu_tests.txt"
