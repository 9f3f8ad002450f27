#!/usr/bin/env bash
# Session 34: the default test selection (-m 'not gpu', what CI runs) on a GPU machine, where
# conftest puts the tests on CUDA tensors: test files dealt to 14 parallel pytest processes
# (gpu_tests_parallel.py passes test ids and hit the argument-length limit for this many).
set -uo pipefail
mkdir -p "$OUT/default"
files=(tests/test_*.py)
for i in $(seq 0 13); do
  group=()
  for j in "${!files[@]}"; do
    if (( j % 14 == i )); then group+=("${files[$j]}"); fi
  done
  (timeout 540 python -m pytest -q -p no:cacheprovider -rfE "${group[@]}" > "$OUT/default/shard$i.log" 2>&1;
   echo "rc=$?" >> "$OUT/default/shard$i.log") &
done
wait
for i in $(seq 0 13); do echo "shard $i: $(grep -E '(passed|failed|error)' "$OUT/default/shard$i.log" | tail -1) $(tail -1 "$OUT/default/shard$i.log")"; done
grep -h "^FAILED\|^ERROR" "$OUT"/default/shard*.log | sort | uniq
