#!/usr/bin/env bash
# The session's GPU check of the final tree: session 27's gpu_final.sh (every -m gpu test in
# 14 shards, a quick softmax and attention bench), then the session's new CPU tests that run
# on CUDA tensors too: attention under autocast and with a 0-d tensor scale, a numpy dim,
# torch.func.grad inside torch.compile, the boolean env switches, threads; then (call 6) the
# later ones: a failing stored plan, an int scale's plan, the row/online grid limit, the
# tuner's re-check of finalists, the dtype check, and `flashtune tune` of two small problems
# (the re-check on a GPU).
set -uo pipefail
bash benchmarks/results/session27_2026-11-23/scripts/gpu_final.sh
timeout 200 python -m pytest -q -p no:cacheprovider tests/test_attention_api.py \
  tests/test_attention_adversarial.py tests/test_softmax_adversarial.py \
  -k "autocast or tensor_scale or dim_rejects or func_grad" > "$OUT/new_tests_gpu.txt" 2>&1
echo "new tests (attention autocast/scale, dim, func.grad) rc=$?"; tail -2 "$OUT/new_tests_gpu.txt"
timeout 150 python -m pytest -q -p no:cacheprovider tests/test_dispatch.py tests/test_fast_launch.py \
  tests/test_audit_threads.py -k "switch or boolean or thread" >> "$OUT/new_tests_gpu.txt" 2>&1
echo "new tests (switches, threads) rc=$?"; tail -2 "$OUT/new_tests_gpu.txt"
timeout 200 python -m pytest -q -p no:cacheprovider tests/test_ops_edge.py tests/test_attention_plans.py \
  tests/test_gen.py tests/test_bench_units.py tests/test_attention_api.py \
  -k "gives_way or int_scale or grid_limit or another_dtype or autocast" >> "$OUT/new_tests_gpu.txt" 2>&1
echo "new tests (plans, grid limit, dtype check) rc=$?"; tail -2 "$OUT/new_tests_gpu.txt"
timeout 240 python -m flashtune tune --db "sqlite:///$OUT/tune.sqlite" --problem softmax:float16:4096x1000 \
  --problem attention_fwd:float16:1x8x1024x64 --trials 6 > "$OUT/tune.txt" 2>&1
echo "tune rc=$?"; tail -6 "$OUT/tune.txt"
