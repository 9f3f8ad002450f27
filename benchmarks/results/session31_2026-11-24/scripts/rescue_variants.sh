#!/usr/bin/env bash
# Where the rescue's cost on ordinary inputs comes from: fp16 default configs timed with
# fold_before/ (no rescue), this tree's rescue, rescue_stages1/ (rescue loops not pipelined)
# and rescue_check_only/ (the test without its key loop: wrong at huge scores, timing only),
# two alternating rounds.
set -uo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
T=flashtune/templates
cp $T/_attention_common.py.jinja /tmp/after.jinja
mkdir -p /tmp/rescue && cp /tmp/after.jinja /tmp/rescue/_attention_common.py.jinja
for round in 1 2; do
  for v in fold_before rescue rescue_stages1 rescue_check_only; do
    if [ $v = rescue ]; then cp /tmp/rescue/_attention_common.py.jinja $T/; else cp "$HERE/$v/_attention_common.py.jinja" $T/; fi
    DTYPES=float16 python "$HERE/attn_times.py" ${v}_$round > "$OUT/${v}_$round.log" 2>&1 || echo "$v failed"
  done
done
cp /tmp/after.jinja $T/_attention_common.py.jinja
python - <<'PY'
import json, os
out = os.environ["OUT"]
vs = ["fold_before", "rescue", "rescue_stages1", "rescue_check_only"]
t = {v: [json.load(open(f"{out}/times_{v}_{r}.json")) for r in (1, 2)] for v in vs}
print("shape causal: min-of-2 us per variant, then ratio to fold_before")
for i, row in enumerate(t["fold_before"][0]):
    us = [min(t[v][0][i]["us"], t[v][1][i]["us"]) for v in vs]
    print(f"{'x'.join(map(str, row['shape']))} {row['causal']}: " + " ".join(f"{u:.1f}" for u in us)
          + " | " + " ".join(f"{u / us[0]:.3f}" for u in us[1:]))
PY
