#!/usr/bin/env bash
# Session 34's GPU check of the final tree, two device calls (each is limited to 10 minutes):
#   gpu_final.sh matrix   session 27's script: every -m gpu test in 14 shards and a quick
#                         softmax/attention bench (the attention templates lost their dead
#                         pv_acc='fp16' branches this session)
#   gpu_final.sh new      this session's changed test files on CUDA tensors, the L2 reset test
#                         through both paths, and a small tune of softmax and attention
set -uo pipefail
if [ "${1:-}" = matrix ]; then
  bash benchmarks/results/session27_2026-11-23/scripts/gpu_final.sh
  exit 0
fi
timeout 300 python -m pytest -q -p no:cacheprovider tests/test_attention_api.py \
  tests/test_attention_adversarial.py tests/test_attention_audit.py tests/test_attention_space.py \
  tests/test_attention_dispatch.py tests/test_ops_edge.py tests/test_cache_failures.py \
  tests/test_cli_source.py tests/test_dispatch_cli.py > "$OUT/changed_tests_cuda.txt" 2>&1
echo "changed files on CUDA rc=$?"; tail -3 "$OUT/changed_tests_cuda.txt"
timeout 150 python -m pytest -q -p no:cacheprovider -m gpu tests/test_tuner_gpu.py tests/test_attention_gpu.py \
  tests/test_attention_tuning.py > "$OUT/gpu_tests.txt" 2>&1
echo "-m gpu tuner/attention rc=$?"; grep -E "passed|failed" "$OUT/gpu_tests.txt" | tail -2
timeout 120 python -m flashtune tune --db "sqlite:///$OUT/tune.sqlite" --problem softmax:float16:4096x1000 \
  --problem attention_fwd:float16:1x8x1024x64 --trials 6 > "$OUT/tune.txt" 2>&1
echo "tune rc=$?"; tail -4 "$OUT/tune.txt"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
python -c "import torch, triton; print(torch.__version__, triton.__version__)"
