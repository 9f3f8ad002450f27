#!/usr/bin/env bash
# Session 37, call 2: odd_rows_regime.py (online against aligned split; few rows under CUDA
# graphs), then the aligned-walk tests on CUDA in 8 shards.
set -uo pipefail
S=benchmarks/results/session37_2026-11-24/scripts
OUT=$OUT timeout 330 python $S/odd_rows_regime.py 2>&1 | grep -v "Warning\|warn_once"
mkdir -p "$OUT/t"
OUT="$OUT/t" MARK="not gpu" timeout 200 python benchmarks/gpu_tests_parallel.py 8 aligned tests/test_softmax_variants.py -k "aligned_walk or one_launch_path or persistent_split" > "$OUT/aligned_tests.txt" 2>&1
echo "aligned tests rc=$?"; tail -2 "$OUT/aligned_tests.txt"
