#!/usr/bin/env bash
# Before/after of the attention P_SHIFT change in one device session: the template of bc5422e
# (copied over the tree's own on this machine's copy), then this tree's, then a comparison.
set -uo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
T=flashtune/templates/_attention_common.py.jinja
cp "$T" /tmp/after.jinja
cp "$HERE/_attention_common_before.py.jinja" "$T"
python "$HERE/attn_pv_shift.py" before > "$OUT/pv_before.log" 2>&1
cp /tmp/after.jinja "$T"
python "$HERE/attn_pv_shift.py" after > "$OUT/pv_after.log" 2>&1
python - <<'PY'
import json, os
out = os.environ["OUT"]
b = json.load(open(f"{out}/pv_before.json")); a = json.load(open(f"{out}/pv_after.json"))
print("shape causal pv_acc: before us, after us, after/before")
for x, y in zip(b, a):
    print(f"{'x'.join(map(str, x['shape']))} {x['causal']} {x['pv_acc']}: {x['us']:.1f} {y['us']:.1f} {y['us']/x['us']:.3f}  err {x['err_vs_sdpa']:.1e}/{y['err_vs_sdpa']:.1e}")
PY
