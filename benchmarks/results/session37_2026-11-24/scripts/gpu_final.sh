#!/usr/bin/env bash
# Session 37, the final code: the decode-rows probe (host us per call, GPU us under CUDA graphs;
# session 36's script), every -m gpu softmax test in 12 shards, and the split tests of
# test_softmax_variants on CUDA (the workspace test among them) in 8 shards.
set -uo pipefail
S36=benchmarks/results/session36_2026-11-24/scripts
OUT=$OUT timeout 150 python $S36/decode_rows_probe.py 2>&1 | grep -v "Warning\|warn_once\|ref_ok ="
mkdir -p "$OUT/t"
OUT="$OUT/t" MARK=gpu timeout 300 python benchmarks/gpu_tests_parallel.py 12 gpu tests/test_softmax_gpu.py > "$OUT/gpu_tests.txt" 2>&1
echo "gpu softmax tests rc=$?"; tail -2 "$OUT/gpu_tests.txt"
OUT="$OUT/t" MARK="not gpu" timeout 120 python benchmarks/gpu_tests_parallel.py 8 variants tests/test_softmax_variants.py -k "split or aligned or persistent or one_launch" > "$OUT/variants_tests.txt" 2>&1
echo "variants split tests rc=$?"; tail -2 "$OUT/variants_tests.txt"
