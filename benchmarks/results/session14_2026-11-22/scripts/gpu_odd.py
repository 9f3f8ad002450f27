"""GPU audit of the public ops on cases no issue names: tuned winners reused on other shapes of
their bucket, odd widths, strided views, >2**31-element tensors, adversarial values, a broken
and a tampered cache. Prints one line per case and a summary; exit 1 on any failure.

Run on the device (tuned DB of this session's H200 tune in scratch/tuned.sqlite):
  source .whl/prelude.sh && python scratch/gpu_odd.py
"""
from __future__ import annotations

import json
import os
import shutil
import sqlite3
import sys
import time
import traceback
import warnings

OUT = os.environ.get("OUT", "/tmp")
DB = f"{OUT}/odd.sqlite"
shutil.copy("scratch/tuned.sqlite", DB)
os.environ["FLASHTUNE_DB"] = f"sqlite:///{DB}"

import torch  # noqa: E402

import flashtune  # noqa: E402
import flashtune.dispatch as dispatch  # noqa: E402
from flashtune.reference import (attention_ref, check_accuracy, softmax_backward_ref,  # noqa: E402
                                 softmax_backward_scale, softmax_ref)

DEV = "cuda"
DT = {"fp16": torch.float16, "bf16": torch.bfloat16, "fp32": torch.float32}
FAILS: list[str] = []
torch.manual_seed(0)


def report(name, ok, detail=""):
    print(f"{'ok  ' if ok else 'FAIL'} {name} {detail}", flush=True)
    if not ok:
        FAILS.append(name)


def how(x2d_shape, dtype, op="softmax"):
    try:
        c = dispatch.choice(op, x2d_shape, str(dtype).replace("torch.", ""), torch.device(DEV))
        return f"[{c.how}: {c.config['regime']} b{c.config['block']} s{c.config['splits']}]"
    except Exception as e:  # noqa: BLE001
        return f"[choice failed: {e}]"


def check_softmax(name, x, dim=-1, log=False, backward=False):
    fn, peer_fn = ((flashtune.log_softmax, torch.log_softmax) if log
                   else (flashtune.softmax, torch.softmax))
    try:
        out = fn(x, dim)
        torch.cuda.synchronize()
        ref = softmax_ref(x, dim, log)
        acc = check_accuracy(out, ref, peer_fn(x, dim))
        report(f"{name} {'log_' if log else ''}softmax fwd", acc.ok, str(acc))
        del ref
        if backward:
            xg = x.detach().clone().requires_grad_(True)
            y = fn(xg, dim)
            dy = torch.randn_like(y)
            y.backward(dy)
            xp = x.detach().clone().requires_grad_(True)
            peer_fn(xp, dim).backward(dy)
            y64 = softmax_ref(x, dim, log)
            ref_g = softmax_backward_ref(y64, dy, dim, log)
            acc = check_accuracy(xg.grad, ref_g, xp.grad,
                                 scale=softmax_backward_scale(y64, dy, dim, log))
            report(f"{name} {'log_' if log else ''}softmax bwd", acc.ok, str(acc))
    except Exception as e:  # noqa: BLE001
        report(f"{name} {'log_' if log else ''}softmax", False, f"raised {type(e).__name__}: {e}")
        traceback.print_exc()


def check_rows(name, x, log=False):
    """Huge tensors: check row by row (a float64 copy of the whole would not fit)."""
    fn, peer_fn = ((flashtune.log_softmax, torch.log_softmax) if log
                   else (flashtune.softmax, torch.softmax))
    try:
        out = fn(x, -1)
        torch.cuda.synchronize()
        rows = sorted({0, 1, x.shape[0] // 2, x.shape[0] - 2, x.shape[0] - 1})
        if x.shape[0] > 64:
            idx = torch.tensor(rows, device=DEV)
            accs = [check_accuracy(out[idx], softmax_ref(x[idx], -1, log), peer_fn(x[idx], -1))]
        else:
            accs = [check_accuracy(out[r:r + 1], softmax_ref(x[r:r + 1], -1, log),
                                   peer_fn(x[r:r + 1], -1)) for r in rows]
        ok = all(a.ok for a in accs)
        report(f"{name} {'log_' if log else ''}softmax rows {rows}", ok, str(max(accs, key=lambda a: a.err)))
    except Exception as e:  # noqa: BLE001
        report(f"{name}", False, f"raised {type(e).__name__}: {e}")
        traceback.print_exc()


def softmax_cases():
    # Tuned winners reused on other shapes of their bucket (and the nearest bucket).
    for shape in [(9, 600000), (16, 1048575), (100, 200001), (128, 262143), (3000, 40000),
                  (700, 60001), (1000, 65535), (50000, 100), (65535, 127), (12000, 1000),
                  (5000, 3000), (4096, 50257), (4095, 50258), (2048, 16383), (17, 1048577),
                  (1, 1), (1, 2), (3, 5), (1, 1048576), (2, 2 ** 21 + 3), (33, 262145)]:
        for tag, dt in DT.items():
            x = torch.randn(shape, device=DEV, dtype=dt) * 3
            name = f"{shape[0]}x{shape[1]} {tag} {how(shape, dt)}"
            check_softmax(name, x, backward=shape[0] * shape[1] <= 2 ** 22)
            if tag == "bf16":
                check_softmax(name, x, log=True)
    # Adversarial values through tuned winners.
    for shape in [(16, 1048576), (128, 262144), (4096, 50257), (65536, 128)]:
        for tag in ("fp16", "bf16"):
            dt = DT[tag]
            x = torch.randn(shape, device=DEV, dtype=torch.float32).mul(1000).to(dt)
            check_softmax(f"{shape} {tag} x1000", x)
            x = torch.randn(shape, device=DEV, dtype=dt)
            x[0] = float("-inf")
            x[1, ::7] = float("-inf")
            x[2, shape[1] // 2] = float("nan")
            x[3, -1] = float("inf")
            check_softmax(f"{shape} {tag} -inf/nan/inf rows", x)
            check_softmax(f"{shape} {tag} -inf/nan/inf rows", x, log=True)
    # Strided views and other dims.
    base = torch.randn(4096, 2 * 50257, device=DEV, dtype=torch.float16)
    check_softmax("every other column of 4096x100514 fp16", base[:, ::2])
    check_softmax("column slice 4096x[3:50260] fp16", base[:, 3:50260], backward=True)
    t = torch.randn(50257, 64, device=DEV, dtype=torch.bfloat16)
    check_softmax("50257x64 bf16 dim=0", t, dim=0, backward=True)
    t3 = torch.randn(8, 3000, 17, device=DEV, dtype=torch.float32)
    check_softmax("8x3000x17 fp32 dim=1", t3, dim=1, backward=True)
    e = torch.randn(1, 262144, device=DEV, dtype=torch.float16).expand(64, 262144)
    check_softmax("expanded (stride 0) 64x262144 fp16", e)
    # More than 2**31 elements.
    big = torch.randn(2 ** 21 + 5, 1024, device=DEV, dtype=torch.float16)
    check_rows("2097157x1024 fp16 (>2**31 elements)", big)
    del big
    big = torch.randn(3, 2 ** 30 + 3, device=DEV, dtype=torch.float16)
    check_rows("3x1073741827 fp16", big)
    del big
    big = torch.randn(40, 2 ** 26 + 1, device=DEV, dtype=torch.bfloat16)
    check_rows("40x67108865 bf16", big, log=True)
    del big
    torch.cuda.empty_cache()


def attention_cases():
    cases = [((1, 1, 1, 64), 1, False), ((2, 3, 7, 64), 7, True), ((1, 4, 1000, 128), 1537, True),
             ((1, 4, 1537, 128), 1000, True), ((2, 2, 333, 8), 333, False),
             ((2, 2, 333, 24), 700, True), ((1, 2, 4097, 72), 4097, True),
             ((1, 2, 2000, 256), 2000, True), ((2, 8, 333, 64), 333, True),
             ((1, 1, 65536, 64), 65536, True), ((3, 5, 129, 136), 257, False)]
    for (b, h, nq, d), nk, causal in cases:
        for tag in ("fp16", "bf16"):
            dt = DT[tag]
            hkv = 2 if h == 8 else h
            q = torch.randn(b, h, nq, d, device=DEV, dtype=dt)
            k = torch.randn(b, hkv, nk, d, device=DEV, dtype=dt)
            v = torch.randn(b, hkv, nk, d, device=DEV, dtype=dt)
            name = f"attention {b}x{h}x{nq}x{d} nk={nk} hkv={hkv} causal={causal} {tag}"
            try:
                out = flashtune.attention(q, k, v, causal=causal)
                ref, _ = attention_ref(q, k, v, causal)
                kk, vv = (k.repeat_interleave(h // hkv, 1), v.repeat_interleave(h // hkv, 1))
                if causal:
                    from torch.nn.attention.bias import causal_lower_right
                    mask = causal_lower_right(nq, nk)
                    peer = torch.nn.functional.scaled_dot_product_attention(q, kk, vv, attn_mask=mask)
                else:
                    peer = torch.nn.functional.scaled_dot_product_attention(q, kk, vv)
                # Rows that see no key: ours 0 (documented), torch NaN.
                acc = check_accuracy(out, ref, peer.nan_to_num(0.0))
                report(name, acc.ok, str(acc))
            except Exception as e:  # noqa: BLE001
                report(name, False, f"raised {type(e).__name__}: {e}")
                traceback.print_exc()
    # (B, N, H, D) memory viewed as (B, H, N, D).
    q, k, v = (torch.randn(2, 1000, 6, 64, device=DEV, dtype=torch.float16).transpose(1, 2)
               for _ in range(3))
    out = flashtune.attention(q, k, v, causal=True)
    ref, _ = attention_ref(q, k, v, True)
    acc = check_accuracy(out, ref, torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True))
    report("attention transposed BNHD views causal fp16", acc.ok, str(acc))


def cache_cases():
    # A tampered winner: out-of-space block, then an in-space config that cannot run the shape.
    con = sqlite3.connect(DB)
    rows = con.execute("select rowid, config from ft_v1_winners where op = 'softmax'").fetchall()
    for cfg_change, label in ((dict(block=3), "out-of-space block 3"),
                              (dict(regime="row", block=128, rows_per_program=1, splits=1,
                                    fused=False, programs_per_sm=0, num_warps=1, l2_hint=False,
                                    lane_stats=False, vector_stats=False, align=False,
                                    num_stages=1), "in-space row config that cannot hold the row")):
        for rid, cfg in rows:
            c = json.loads(cfg)
            c.update(cfg_change)
            con.execute("update ft_v1_winners set config = ? where rowid = ?", (json.dumps(c), rid))
        con.commit()
        dispatch.reset()
        with warnings.catch_warnings(record=True) as seen:
            warnings.simplefilter("always")
            x = torch.randn(16, 1048576, device=DEV, dtype=torch.float16)
            for _ in range(20):
                out = flashtune.softmax(x)
            torch.cuda.synchronize()
        acc = check_accuracy(out, softmax_ref(x), torch.softmax(x, -1))
        msgs = [str(w.message)[:120] for w in seen]
        report(f"tampered winner ({label})", acc.ok and len(msgs) <= 1,
               f"{acc}; {len(msgs)} warning(s): {msgs}")
    con.close()
    # A file of random bytes as the database.
    with open(f"{OUT}/garbage.sqlite", "wb") as f:
        f.write(os.urandom(8192))
    os.environ["FLASHTUNE_DB"] = f"sqlite:///{OUT}/garbage.sqlite"
    dispatch.reset()
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        x = torch.randn(128, 262144, device=DEV, dtype=torch.bfloat16)
        for _ in range(20):
            out = flashtune.softmax(x)
            out2 = flashtune.log_softmax(x)
        torch.cuda.synchronize()
    ok = (check_accuracy(out, softmax_ref(x), torch.softmax(x, -1)).ok
          and check_accuracy(out2, softmax_ref(x, -1, True), torch.log_softmax(x, -1)).ok)
    msgs = [str(w.message)[:120] for w in seen]
    report("garbage database file", ok and len(msgs) <= 2, f"{len(msgs)} warning(s): {msgs}")


if __name__ == "__main__":
    t0 = time.time()
    print(torch.cuda.get_device_name(), torch.__version__, flush=True)
    for part in (softmax_cases, attention_cases, cache_cases):
        part()
    print(f"\n{len(FAILS)} failures in {time.time() - t0:.0f}s: {FAILS}")
    sys.exit(1 if FAILS else 0)
