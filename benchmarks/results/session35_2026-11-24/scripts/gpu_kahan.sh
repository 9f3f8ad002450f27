#!/usr/bin/env bash
# Session 35, call 4: the softmax statistics' sums compensated (forward lane / vector / max-pass
# d, the backward's row sums), with 1 / d as div.rn. fp32 accuracy per config, the templates
# before this session (old_templates/) and now; every -m gpu softmax test in 14 shards, with
# the tests' GPU fp32 slack at the project's 2 ulps; a quick bench of softmax and the backward.
set -uo pipefail
D=$PWD/benchmarks/results/session35_2026-11-24/scripts
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > "$OUT/device.txt"
python -c "import torch, triton; print(torch.__version__, triton.__version__)" >> "$OUT/device.txt"
grep -n "^GPU_FP32_SLACK_ULPS" tests/softmax_cases.py >> "$OUT/device.txt"
mkdir -p /tmp/old && cp -r flashtune /tmp/old/ && cp $D/old_templates/*.jinja /tmp/old/flashtune/templates/
OPS=softmax TAG=new_softmax FLASHTUNE_CACHE_DIR=/tmp/ftc_new timeout 200 python $D/fp32_ulps.py > "$OUT/new_softmax.txt" 2>&1 &
OPS=log_softmax TAG=new_log_softmax FLASHTUNE_CACHE_DIR=/tmp/ftc_new2 timeout 200 python $D/fp32_ulps.py > "$OUT/new_log_softmax.txt" 2>&1 &
(cd /tmp && PYTHONPATH=/tmp/old:$PYTHONPATH OPS=softmax TAG=old_softmax FLASHTUNE_CACHE_DIR=/tmp/ftc_old timeout 200 python $D/fp32_ulps.py > "$OUT/old_softmax.txt" 2>&1) &
wait
for f in "$OUT"/fp32_ulps_*.log; do echo "== $f"; grep -v "| 0\.[0-9]* | " "$f"; done
grep -l "Traceback" "$OUT"/*.txt && tail -5 "$OUT"/*.txt
mkdir -p "$OUT/t"
OUT="$OUT/t" MARK=gpu timeout 260 python benchmarks/gpu_tests_parallel.py 14 TAG tests/test_softmax_gpu.py > "$OUT/gpu_tests.txt" 2>&1
echo "gpu softmax tests rc=$?"; tail -3 "$OUT/gpu_tests.txt"
timeout 150 python -m pytest -q -p no:cacheprovider tests/test_softmax_numerics.py > "$OUT/numerics_cuda.txt" 2>&1
echo "numerics on CUDA rc=$?"; tail -2 "$OUT/numerics_cuda.txt"
mkdir -p "$OUT/bench"
timeout 200 python -m flashtune bench --quick --ops softmax,backward --budget 180 --no-overhead --out "$OUT/bench" > "$OUT/bench_stdout.txt" 2>&1
echo "bench rc=$?"; tail -24 "$OUT/bench_stdout.txt"
