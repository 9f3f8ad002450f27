#!/usr/bin/env bash
# Session 36, call 10, on the final code: every -m gpu softmax test in 12 shards (the space's
# revision 3 and the split kernels in grains), the tuner's -m gpu tests, and a quick softmax +
# backward bench.
set -uo pipefail
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > "$OUT/device.txt"
python -c "import torch, triton; print(torch.__version__, triton.__version__)" >> "$OUT/device.txt"
mkdir -p "$OUT/t"
OUT="$OUT/t" MARK=gpu timeout 240 python benchmarks/gpu_tests_parallel.py 12 TAG tests/test_softmax_gpu.py > "$OUT/gpu_tests.txt" 2>&1
echo "gpu softmax tests rc=$?"; tail -2 "$OUT/gpu_tests.txt"
timeout 120 python -m pytest -q -p no:cacheprovider -m gpu tests/test_tuner_gpu.py > "$OUT/tuner_gpu.txt" 2>&1
echo "tuner -m gpu: $(tail -1 "$OUT/tuner_gpu.txt")"
mkdir -p "$OUT/bench"
timeout 170 python -m flashtune bench --quick --ops softmax,backward --budget 150 --no-overhead --out "$OUT/bench" > "$OUT/bench_stdout.txt" 2>&1
echo "bench rc=$?"; grep -A10 "^softmax (GB/s" "$OUT/bench_stdout.txt"; grep -A18 "^backward (GB/s" "$OUT/bench_stdout.txt" | tail -17
