#!/usr/bin/env bash
# Session 33: the rewritten GPU test (with scrub_l2, and with it off: it must fail then), then a
# quick softmax bench with the scrub before every timing.
set -uo pipefail
timeout 120 python -m pytest -q -p no:cacheprovider -m gpu tests/test_tuner_gpu.py -k l2_hint > "$OUT/l2_test.txt" 2>&1
echo "GPU test with scrub_l2 rc=$?"; tail -1 "$OUT/l2_test.txt"
timeout 120 python - > "$OUT/l2_test_off.txt" 2>&1 <<'PY'
import sys
from flashtune.tuner import timing
timing.scrub_l2 = lambda: None
sys.path.insert(0, "tests")
import test_tuner_gpu
try:
    test_tuner_gpu.test_a_config_timed_after_an_l2_hint_config_is_not_sped_up()
    print("scrub_l2 off: the test PASSED (it cannot tell)")
except AssertionError as err:
    print("scrub_l2 off: the test FAILED, as it should:", str(err)[:300])
PY
tail -1 "$OUT/l2_test_off.txt"
timeout 330 python -m flashtune bench --quick --ops softmax --no-overhead --budget 300 --out "$OUT/bench" > "$OUT/bench.txt" 2>&1
echo "bench rc=$?"; grep -E "^\| [0-9]" "$OUT/bench/flashtune_bench.md" | cut -d'|' -f2-7,11 | head -30
