#!/usr/bin/env bash
# Session 33's GPU check of the final tree (one device call): the files this session changed or
# added, on CUDA tensors (the default -m 'not gpu' set: conftest puts them on CUDA), then the
# -m gpu tests of the public ops and the fast launch (torch.compile on CUDA included), and a
# small tune.
set -uo pipefail
timeout 300 python -m pytest -q -p no:cacheprovider tests/test_subclasses.py tests/test_dtensor.py \
  tests/test_ops.py tests/test_ops_edge.py tests/test_softmax_bad_input.py tests/test_cache_failures.py \
  tests/test_dispatch_cli.py tests/test_cli_arguments.py > "$OUT/changed_tests_cuda.txt" 2>&1
echo "changed files on CUDA rc=$?"; tail -3 "$OUT/changed_tests_cuda.txt"
timeout 200 python -m pytest -q -p no:cacheprovider -m gpu tests/test_ops.py tests/test_fast_launch.py \
  > "$OUT/gpu_ops_tests.txt" 2>&1
echo "-m gpu ops rc=$?"; tail -3 "$OUT/gpu_ops_tests.txt"
timeout 100 python -m flashtune tune --db "sqlite:///$OUT/tune.sqlite" --problem softmax:float16:4096x1000 \
  --trials 4 > "$OUT/tune.txt" 2>&1
echo "tune rc=$?"; tail -3 "$OUT/tune.txt"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
python -c "import torch, triton; print(torch.__version__, triton.__version__)"
