#!/usr/bin/env bash
# One device call on the final tree: every -m gpu test in 14 shards, then this session's new
# and changed test files (not marked gpu) with their tensors on CUDA. Logs under $OUT.
set -uo pipefail
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > "$OUT/device.txt"
python -c "import torch, triton; print(torch.__version__, triton.__version__)" >> "$OUT/device.txt"
mkdir -p "$OUT/t"
OUT="$OUT/t" MARK=gpu timeout 400 python benchmarks/gpu_tests_parallel.py 14 TAG tests/ > "$OUT/gpu_tests.txt" 2>&1
echo "gpu tests rc=$?"
tail -2 "$OUT/gpu_tests.txt"
timeout 170 python -m pytest -q -p no:cacheprovider tests/test_audit_autograd.py tests/test_audit_fork.py \
  tests/test_audit_threads.py tests/test_ops_edge.py tests/test_ops.py tests/test_audit_kernel_files.py \
  > "$OUT/cuda_changed_files.txt" 2>&1
echo "changed files on cuda rc=$?"
tail -15 "$OUT/cuda_changed_files.txt"
cat "$OUT/device.txt"
