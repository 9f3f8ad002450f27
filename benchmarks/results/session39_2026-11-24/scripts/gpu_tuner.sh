#!/usr/bin/env bash
# Session 39 (calls 1, 2 and 4): the tuner's -m gpu tests, the total-time tests on this
# machine, and the same two-problem run as session 38's call 3 (--total-time 40), plus one
# problem under --total-time 20: wall time next to the limit, winners stored. Call 1 ran it on
# dd3fdd3 (the first problem leaves half its share, at most 20 s, for its finish), call 2 on
# 7fdf0fd (also: past the total the finish re-times only the fastest trial and the seeded
# configs), call 4 on the session's last tuner commit (also: the worker starts before the
# first listing, and the listing's walk is faster); call 4 adds tune_phases.py's timeline.
set -uo pipefail
timeout 150 python -m pytest -q -p no:cacheprovider -m gpu tests/test_tuner_gpu.py > "$OUT/tuner_gpu.txt" 2>&1
echo "tuner -m gpu rc=$?"; tail -1 "$OUT/tuner_gpu.txt"
timeout 100 python -m pytest -q -p no:cacheprovider tests/test_tuner.py -k "cuts_a_batch or total_time" 2>&1 | tail -1
run() {  # name, total, problems...
  local name=$1 total=$2; shift 2
  local start; start=$(date +%s.%N)
  timeout 200 python -m flashtune tune --db "sqlite:///$OUT/$name.sqlite" "$@" --total-time "$total" > "$OUT/$name.txt" 2>&1
  echo "$name rc=$? wall $(python -c "import time; print(round(time.time() - $start, 1))") s (--total-time $total)"
  tr '\r' '\n' < "$OUT/$name.txt" | grep -v '%|' | cut -c1-160 | tail -4
}
run two 40 --problem softmax:float16:4096x50257 --problem softmax:float32:16x1048576
run one 20 --problem softmax:bfloat16:1024x65536
python benchmarks/results/session39_2026-11-24/scripts/tune_phases.py 20 softmax:bfloat16:1024x65536 > "$OUT/phases_one.txt" 2>&1
echo "phases rc=$?"; cat "$OUT/phases_one.txt"
