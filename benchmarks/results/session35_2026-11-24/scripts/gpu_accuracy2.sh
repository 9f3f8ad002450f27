#!/usr/bin/env bash
# Session 35, call 3: fp32 accuracy per regime, the templates before this session's div.rn
# change (old_templates/, in a copy of the package) and after, four processes at once; then a
# quick softmax bench of the new tree.
set -uo pipefail
D=$PWD/benchmarks/results/session35_2026-11-24/scripts
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > "$OUT/device.txt"
mkdir -p /tmp/old && cp -r flashtune /tmp/old/ && cp $D/old_templates/*.jinja /tmp/old/flashtune/templates/
for op in softmax log_softmax; do
  OPS=$op TAG=new_$op FLASHTUNE_CACHE_DIR=/tmp/ftc_new timeout 200 python $D/fp32_ulps.py > "$OUT/new_$op.txt" 2>&1 &
  (cd /tmp && PYTHONPATH=/tmp/old:$PYTHONPATH OPS=$op TAG=old_$op FLASHTUNE_CACHE_DIR=/tmp/ftc_old timeout 200 python $D/fp32_ulps.py > "$OUT/old_$op.txt" 2>&1) &
done
wait
for f in "$OUT"/fp32_ulps_*.log; do echo "== $f"; cat "$f"; done
grep -l "Traceback" "$OUT"/*.txt && tail -5 "$OUT"/*.txt
mkdir -p "$OUT/bench"
timeout 250 python -m flashtune bench --quick --ops softmax --budget 220 --no-overhead --out "$OUT/bench" > "$OUT/bench_stdout.txt" 2>&1
echo "bench rc=$?"; tail -32 "$OUT/bench_stdout.txt"
