#!/usr/bin/env bash
# Session 32's GPU check of the final tree, two device calls (each is limited to 10 minutes):
#   gpu_final.sh matrix   session 27's script: every -m gpu test in 14 shards (each kernel now
#                         launched with enable_fp_fusion=True) and a quick softmax/attention bench
#   gpu_final.sh new      this session's new and changed tests on CUDA tensors, a small tune and
#                         re-tune (the tuner's compare-and-swap store), and the small-rows probe
set -uo pipefail
if [ "${1:-}" = matrix ]; then
  bash benchmarks/results/session27_2026-11-23/scripts/gpu_final.sh
  exit 0
fi
S=benchmarks/results/session32_2026-11-24/scripts
timeout 200 python -m pytest -q -p no:cacheprovider tests/test_launch_options.py tests/test_dtensor.py \
  tests/test_attention_adversarial.py tests/test_dispatch.py tests/test_cache.py \
  -k "fusion or dtensor or oracle or huge or filter_recipe or another_writer" \
  > "$OUT/new_tests_gpu.txt" 2>&1
echo "new tests rc=$?"; tail -3 "$OUT/new_tests_gpu.txt"
timeout 150 python -m flashtune tune --db "sqlite:///$OUT/tune.sqlite" --problem softmax:float16:4096x1000 \
  --problem attention_fwd:float16:1x8x1024x64 --trials 6 > "$OUT/tune.txt" 2>&1
echo "tune rc=$?"; tail -4 "$OUT/tune.txt"
timeout 100 python -m flashtune tune --db "sqlite:///$OUT/tune.sqlite" --problem softmax:float16:4096x1000 \
  --trials 4 > "$OUT/tune2.txt" 2>&1
echo "re-tune rc=$?"; tail -3 "$OUT/tune2.txt"
timeout 200 python "$S/small_rows_probe.py" > "$OUT/small_rows_probe.txt" 2>&1
echo "probe rc=$?"; cat "$OUT/small_rows_probe.txt"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
python -c "import torch, triton; print(torch.__version__, triton.__version__)"
