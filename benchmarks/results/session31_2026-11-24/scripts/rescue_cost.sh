#!/usr/bin/env bash
# The attention key loop's rescue at huge scores: its cost on ordinary inputs (default configs,
# fold_before/ templates against this tree's, alternating, two rounds), huge_scores.py with
# each, then the attention tests that name huge scores on CUDA tensors.
set -uo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
HUGE="$HERE/../../session30_2026-11-23/scripts/huge_scores.py"  # session 30's, unchanged
T=flashtune/templates
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > "$OUT/device.txt"
python -c "import torch, triton; print(torch.__version__, triton.__version__)" >> "$OUT/device.txt"
cp $T/_attention_common.py.jinja /tmp/after.jinja
timeout 150 python -m pytest -q -p no:cacheprovider tests/test_attention_adversarial.py -k "huge or scales or inf or pv_acc" > "$OUT/adversarial_gpu.txt" 2>&1
echo "adversarial on cuda rc=$?"; tail -2 "$OUT/adversarial_gpu.txt"
for round in 1 2; do
  cp "$HERE/fold_before/_attention_common.py.jinja" $T/
  python "$HERE/attn_times.py" before$round > "$OUT/before$round.log" 2>&1
  [ $round = 1 ] && python "$HUGE" > "$OUT/huge_before.txt" 2>&1
  cp /tmp/after.jinja $T/_attention_common.py.jinja
  python "$HERE/attn_times.py" after$round > "$OUT/after$round.log" 2>&1
  [ $round = 1 ] && python "$HUGE" > "$OUT/huge_after.txt" 2>&1
done
grep -v Warning "$OUT/huge_before.txt" | grep -v "return _read" | sed 's/^/before: /'
grep -v Warning "$OUT/huge_after.txt" | grep -v "return _read" | sed 's/^/after: /'
python - <<'PY'
import json, os
out = os.environ["OUT"]
load = lambda n: json.load(open(f"{out}/times_{n}.json"))
b1, b2, a1, a2 = load("before1"), load("before2"), load("after1"), load("after2")
print("dtype shape causal: before us (2 rounds), after us (2 rounds), after/before (min of rounds)")
for w, x, y, z in zip(b1, b2, a1, a2):
    b, a = min(w["us"], x["us"]), min(y["us"], z["us"])
    print(f"{w['dtype'][6:]} {'x'.join(map(str, w['shape']))} {w['causal']}: {w['us']:.1f} {x['us']:.1f} | "
          f"{y['us']:.1f} {z['us']:.1f} | {a / b:.3f}")
PY
cat "$OUT/device.txt"
