#!/usr/bin/env bash
# Session 40: the tuner's -m gpu tests; the README's new test command on a GPU machine (-n auto
# must run in one process there: the conftest hook gives xdist no workers with CUDA); and the
# two-problem --total-time 40 run of sessions 38-39, timed from the shell, now that the total
# counts from the command's start (its imports included).
set -uo pipefail
timeout 150 python -m pytest -q -p no:cacheprovider -m gpu tests/test_tuner_gpu.py > "$OUT/tuner_gpu.txt" 2>&1
echo "tuner -m gpu rc=$?"; tail -1 "$OUT/tuner_gpu.txt"
timeout 200 python -m pytest -n auto --dist loadfile -p no:cacheprovider tests/test_gen.py > "$OUT/xdist_on_gpu.txt" 2>&1
echo "-n auto on a GPU machine rc=$?"; grep -E "^(created|[0-9]+ workers)|passed|failed" "$OUT/xdist_on_gpu.txt" | tail -3
grep -c "gw[0-9]" "$OUT/xdist_on_gpu.txt" | sed 's/^/lines naming an xdist worker: /'
run() {  # name, total, problems...
  local name=$1 total=$2; shift 2
  local start; start=$(date +%s.%N)
  timeout 200 python -m flashtune tune --db "sqlite:///$OUT/$name.sqlite" "$@" --total-time "$total" > "$OUT/$name.txt" 2>&1
  echo "$name rc=$? wall $(python -c "import time; print(round(time.time() - $start, 1))") s (--total-time $total)"
  tr '\r' '\n' < "$OUT/$name.txt" | grep -v '%|' | cut -c1-160 | tail -4
}
run two 40 --problem softmax:float16:4096x50257 --problem softmax:float32:16x1048576
run one 20 --problem softmax:bfloat16:1024x65536
