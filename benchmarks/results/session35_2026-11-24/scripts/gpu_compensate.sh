#!/usr/bin/env bash
# Session 35, call 5: compensation only where a row or segment has more than 32 chunks
# (COMPENSATE at launch). fp32 accuracy per config (new tree) and the numerics tests on CUDA,
# at once; every -m gpu softmax test in 14 shards (GPU fp32 slack 2 ulps); a quick bench of
# softmax and the backward; the tuner's -m gpu tests (--total-time's setup deadline changed).
set -uo pipefail
D=$PWD/benchmarks/results/session35_2026-11-24/scripts
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > "$OUT/device.txt"
python -c "import torch, triton; print(torch.__version__, triton.__version__)" >> "$OUT/device.txt"
grep -n "^GPU_FP32_SLACK_ULPS" tests/softmax_cases.py >> "$OUT/device.txt"
OPS=softmax TAG=new_softmax FLASHTUNE_CACHE_DIR=/tmp/ftc_new timeout 200 python $D/fp32_ulps.py > "$OUT/new_softmax.txt" 2>&1 &
OPS=log_softmax TAG=new_log_softmax FLASHTUNE_CACHE_DIR=/tmp/ftc_new2 timeout 200 python $D/fp32_ulps.py > "$OUT/new_log_softmax.txt" 2>&1 &
timeout 200 python -m pytest -q -p no:cacheprovider tests/test_softmax_numerics.py > "$OUT/numerics_cuda.txt" 2>&1 &
wait
echo "numerics on CUDA:"; tail -1 "$OUT/numerics_cuda.txt"
for f in "$OUT"/fp32_ulps_*.log; do echo "== $f (rows over 2 ulps)"; awk -F' [|] ' 'NR>2 && $5+0 > 2.0' "$f"; done
grep -l "Traceback" "$OUT"/*.txt && tail -5 "$OUT"/*.txt
mkdir -p "$OUT/t"
OUT="$OUT/t" MARK=gpu timeout 200 python benchmarks/gpu_tests_parallel.py 14 TAG tests/test_softmax_gpu.py > "$OUT/gpu_tests.txt" 2>&1
echo "gpu softmax tests rc=$?"; tail -2 "$OUT/gpu_tests.txt"
mkdir -p "$OUT/bench"
timeout 170 python -m flashtune bench --quick --ops softmax,backward --budget 150 --no-overhead --out "$OUT/bench" > "$OUT/bench_stdout.txt" 2>&1
echo "bench rc=$?"; grep -A10 "^softmax (GB/s" "$OUT/bench_stdout.txt"; grep -A18 "^backward (GB/s" "$OUT/bench_stdout.txt"
timeout 100 python -m pytest -q -p no:cacheprovider -m gpu tests/test_tuner_gpu.py > "$OUT/tuner_gpu.txt" 2>&1
echo "tuner -m gpu rc=$?"; tail -1 "$OUT/tuner_gpu.txt"
