#!/usr/bin/env bash
# pv_acc fp16: the per-score 1/BLOCK_N multiply (this tree) against the P_SHIFT exponent shift
# it replaced (the template of 22b9b70, copied over this machine's copy for the first run).
# Uses session 24's attn_pv_shift.py: default configs with pv_acc forced, do_bench medians.
set -uo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
S24=benchmarks/results/session24_2026-11-23/scripts
T=flashtune/templates/_attention_common.py.jinja
cp "$T" /tmp/after.jinja
cp "$HERE/_attention_common_p_shift.py.jinja" "$T"
python "$S24/attn_pv_shift.py" before > "$OUT/pv_before.log" 2>&1
cp /tmp/after.jinja "$T"
python "$S24/attn_pv_shift.py" after > "$OUT/pv_after.log" 2>&1
python - <<'PY'
import json, os
out = os.environ["OUT"]
b = json.load(open(f"{out}/pv_before.json")); a = json.load(open(f"{out}/pv_after.json"))
print("shape causal pv_acc: P_SHIFT us, multiply us, multiply/P_SHIFT")
for x, y in zip(b, a):
    print(f"{'x'.join(map(str, x['shape']))} {x['causal']} {x['pv_acc']}: {x['us']:.1f} {y['us']:.1f} {y['us']/x['us']:.3f}  err {x['err_vs_sdpa']:.1e}/{y['err_vs_sdpa']:.1e}")
PY
