#!/usr/bin/env bash
# Session 35: the grouped row-pipelined read-once prototype (groups_bench.py), 16 x 1048576.
set -uo pipefail
D=benchmarks/results/session35_2026-11-24/scripts
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > "$OUT/device.txt"
CONFIGS="$1" timeout 520 python $D/groups_bench.py 2>&1 | grep -v "leaked\|nanobind\|skipped rem\|See https"
