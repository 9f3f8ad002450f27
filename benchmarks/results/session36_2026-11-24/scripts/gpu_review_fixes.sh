#!/usr/bin/env bash
# Session 36, call 15: the review's fixes (strides in grains multiplied back in 64 bits; the
# per-stream partials for the one-launch split only). The new four-thread test, the -m gpu
# split, stream and graph tests in 12 shards, the split timings again (against call 8), and
# the decode-rows probe (host time per call).
set -uo pipefail
S=benchmarks/results/session36_2026-11-24/scripts
timeout 120 python -m pytest -q -p no:cacheprovider -m gpu tests/test_softmax_gpu.py -k two_launch 2>&1 | tail -1
mkdir -p "$OUT/t"
OUT="$OUT/t" MARK=gpu timeout 200 python benchmarks/gpu_tests_parallel.py 12 split tests/test_softmax_gpu.py -k "split or persistent or one_launch or paired or graph or stream" > "$OUT/gpu_tests.txt" 2>&1
echo "gpu split tests rc=$?"; tail -1 "$OUT/gpu_tests.txt"
timeout 60 python -m pytest -q -p no:cacheprovider tests/test_softmax_variants.py -k "split_partials or strided_past" 2>&1 | tail -1
DTYPES=float16,float32 OUT=$OUT timeout 150 python $S/split_grain_after.py 2>&1 | tail -19
timeout 120 python $S/decode_rows_probe.py 2>&1 | grep -v "Warning\|ref_ok ="
