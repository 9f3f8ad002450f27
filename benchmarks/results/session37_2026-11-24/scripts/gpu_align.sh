#!/usr/bin/env bash
# Session 37, call 1: the split regime's aligned walk. Timings first (split_align_probe.py,
# the GPU otherwise idle), then the -m gpu tests of the split regimes in 12 shards and the
# aligned-walk tests on CUDA.
set -uo pipefail
S=benchmarks/results/session37_2026-11-24/scripts
DTYPES=${DTYPES:-float16,float32} OUT=$OUT timeout 300 python $S/split_align_probe.py 2>&1 | grep -v "Warning\|warn_once"
mkdir -p "$OUT/t"
OUT="$OUT/t" MARK=gpu timeout 200 python benchmarks/gpu_tests_parallel.py 12 split tests/test_softmax_gpu.py -k "split or persistent or one_launch or paired" > "$OUT/gpu_tests.txt" 2>&1
echo "gpu split tests rc=$?"; tail -3 "$OUT/gpu_tests.txt"
timeout 90 python -m pytest -q -p no:cacheprovider tests/test_softmax_variants.py -k "aligned_walk" 2>&1 | tail -2
