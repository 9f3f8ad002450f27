#!/usr/bin/env bash
# Session 36, call 2, on the final tree: the default test selection on CUDA (session 34's
# script: test files in 14 parallel pytest processes) after this session's changes (warnings
# at the user's line, the jit.trace hot-path skip, import/show/source checks). Call 3
# (gpu_final_marked.sh): the -m gpu tests of test_ops (the new autocast test's CUDA branch)
# and test_dispatch, and session 24's random public-API cases with default configs.
set -uo pipefail
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > "$OUT/device.txt"
python -c "import torch, triton; print(torch.__version__, triton.__version__)" >> "$OUT/device.txt"
cat "$OUT/device.txt"
bash benchmarks/results/session34_2026-11-24/scripts/default_suite_on_gpu.sh
