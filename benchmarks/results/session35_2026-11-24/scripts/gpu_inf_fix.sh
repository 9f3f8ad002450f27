#!/usr/bin/env bash
# Session 35, call 7: the review's fix (a compensated backward row sum that reached +-inf keeps
# it). Every -m gpu softmax test in 14 shards, the numerics tests on CUDA (its new inf cases),
# and a quick softmax + backward bench.
set -uo pipefail
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > "$OUT/device.txt"
python -c "import torch, triton; print(torch.__version__, triton.__version__)" >> "$OUT/device.txt"
timeout 200 python -m pytest -q -p no:cacheprovider tests/test_softmax_numerics.py > "$OUT/numerics_cuda.txt" 2>&1 &
mkdir -p "$OUT/t"
OUT="$OUT/t" MARK=gpu timeout 220 python benchmarks/gpu_tests_parallel.py 12 TAG tests/test_softmax_gpu.py > "$OUT/gpu_tests.txt" 2>&1
echo "gpu softmax tests rc=$?"; tail -2 "$OUT/gpu_tests.txt"
wait
echo "numerics on CUDA:"; tail -1 "$OUT/numerics_cuda.txt"
mkdir -p "$OUT/bench"
timeout 170 python -m flashtune bench --quick --ops softmax,backward --budget 150 --no-overhead --out "$OUT/bench" > "$OUT/bench_stdout.txt" 2>&1
echo "bench rc=$?"; grep -A10 "^softmax (GB/s" "$OUT/bench_stdout.txt"; grep -A18 "^backward (GB/s" "$OUT/bench_stdout.txt" | tail -17
