"""Random cases through the public API on a GPU, with default configs (empty cache): shapes,
layouts and values that no test lists. Each case is checked against float64 with the
project's accuracy rule (flashtune.reference.check_accuracy).

softmax / log_softmax: forward, and backward through autograd for tensors up to 2**23
elements. Layouts: contiguous, padded rows, a dim other than the last, a transposed view,
a stride-2 slice of the reduced dim, 3-D and 4-D tensors. Values: randn x scale (1, 30,
1000), -inf entries, an all -inf row, a NaN entry.

attention: B, H (grouped-query heads too), Nq, Nk from 1 to 700, D in the supported set,
causal or not, (B, H, N, D) or (B, N, H, D) layouts, return_lse; checked with the tests'
own float64 oracle and torch's math SDPA as the peer.

With NEAR=1 the shapes are drawn near the tuner's problems of tune_then_fuzz.sh (rows and
columns scaled by 0.3-2.5x, odd widths included), so tuned winners, exact and nearest, serve
most cases.

usage: python fuzz_api.py N_SOFTMAX N_ATTENTION SEED   (logs to $OUT/fuzz_api.log)
"""
import math
import os
import random
import sys
import time

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, *[".."] * 4))
sys.path.insert(0, os.path.join(ROOT, "tests"))

import flashtune  # noqa: E402
from flashtune.reference import (check_accuracy, softmax_backward_ref,  # noqa: E402
                                 softmax_backward_scale, softmax_ref)
from attention_cases import check_case  # noqa: E402

OUT = os.environ.get("OUT", "/tmp")
log = open(os.path.join(OUT, "fuzz_api.log"), "w")
failures = []
DTYPES = [torch.float16, torch.bfloat16, torch.float32]
# On a machine without a GPU (a smoke run of this script under TRITON_INTERPRET=1): the CPU,
# with small tensors.
DEVICE = "cuda" if torch.cuda.is_available() else "cpu"
MAX_ELEMS = 2**25 if DEVICE == "cuda" else 2**12


def say(text):
    print(text, flush=True)
    log.write(text + "\n")


def log_uniform(rng, lo, hi):
    return int(round(math.exp(rng.uniform(math.log(lo), math.log(hi)))))


NEAR = os.environ.get("NEAR") == "1"
# (rows, cols) of the softmax problems tune_then_fuzz.sh tunes; (B, H, N, D) of its attention.
TUNED_SOFTMAX = [(65536, 128), (16384, 1024), (8192, 4096), (4096, 16384), (128, 262144),
                 (16, 1048576), (4096, 50257)]
TUNED_ATTENTION = [(2, 16, 4096, 128), (8, 32, 1024, 64), (4, 32, 1000, 128)]


def near(rng, n):
    return max(1, int(n * math.exp(rng.uniform(math.log(0.3), math.log(2.5)))) + rng.choice([0, 0, 1, -1, 7]))


def softmax_input(rng, dtype):
    """(x, dim, description) with x on the GPU in dtype."""
    if NEAR:
        rows, cols = rng.choice(TUNED_SOFTMAX)
        cols = min(near(rng, cols), 2_200_000)
        rows = min(near(rng, rows), max(1, MAX_ELEMS // cols))
    else:
        cols = log_uniform(rng, 1, min(2_200_000, MAX_ELEMS))
        rows = log_uniform(rng, 1, max(1, min(200_000, MAX_ELEMS // cols)))
    layout = rng.choice(["contiguous", "padded", "dim0", "transposed", "stride2", "3d", "4d"])
    scale = rng.choice([1.0, 1.0, 30.0, 1000.0])
    if layout == "padded":
        x = torch.randn(rows, cols + rng.randint(1, 40), device=DEVICE)[:, :cols]
        dim = -1
    elif layout == "dim0":
        x, dim = torch.randn(cols, rows, device=DEVICE), 0
    elif layout == "transposed":
        x, dim = torch.randn(cols, rows, device=DEVICE).t(), -1
    elif layout == "stride2":
        x, dim = torch.randn(rows, 2 * cols, device=DEVICE)[:, ::2], -1
    elif layout == "3d":
        a = rng.choice([d for d in range(1, 9) if rows % d == 0] or [1])
        x, dim = torch.randn(a, rows // a, cols, device=DEVICE), 2
    elif layout == "4d":
        x, dim = torch.randn(2, cols, 1, max(1, rows // 2), device=DEVICE), 1
    else:
        x, dim = torch.randn(rows, cols, device=DEVICE), -1
    x = (x * scale).to(dtype)
    special = rng.choice(["none", "none", "ninf", "allninf", "nan"])
    flat = x.movedim(dim, -1)  # a view: writes reach x
    if special == "ninf" and flat.shape[-1] > 1:
        flat[..., :: max(2, flat.shape[-1] // 7)] = float("-inf")
    elif special == "allninf" and flat.numel():
        flat[(0,) * (flat.dim() - 1)].fill_(float("-inf"))
    elif special == "nan" and flat.numel():
        flat[(0,) * flat.dim()] = float("nan")
    desc = (f"{tuple(x.shape)} dim={dim} {str(dtype)[6:]} {layout} x{scale:g} {special}")
    return x, dim, desc


def softmax_case(rng, i):
    dtype = rng.choice(DTYPES)
    log_op = rng.random() < 0.4
    x, dim, desc = softmax_input(rng, dtype)
    ours_fn = flashtune.log_softmax if log_op else flashtune.softmax
    torch_fn = torch.log_softmax if log_op else torch.softmax
    name = f"s{i} {'log_softmax' if log_op else 'softmax'} {desc}"
    try:
        y = ours_fn(x, dim)
        acc = check_accuracy(y.movedim(dim, -1), softmax_ref(x, dim, log_op).movedim(dim, -1),
                             torch_fn(x, dim).movedim(dim, -1))
        parts = [f"fwd {acc}"]
        ok = acc.ok
        if x.numel() <= 2**23 and x.numel() > 0:
            xg = x.detach().clone().requires_grad_(True)
            yg = ours_fn(xg, dim)
            dy = torch.randn_like(yg)
            yg.backward(dy)
            y_, dy_ = yg.detach().movedim(dim, -1), dy.movedim(dim, -1)
            aten = torch.ops.aten
            back = aten._log_softmax_backward_data if log_op else aten._softmax_backward_data
            peer = back(dy_.contiguous(), y_.contiguous(), -1, y_.dtype)
            bacc = check_accuracy(xg.grad.movedim(dim, -1), softmax_backward_ref(y_, dy_, -1, log_op),
                                  peer, slack_ulps=2.0 + math.log2(max(2, y_.shape[-1])),
                                  scale=softmax_backward_scale(y_, dy_, -1, log_op))
            parts.append(f"bwd {bacc}")
            ok = ok and bacc.ok
    except Exception as exc:  # noqa: BLE001 - a crash is a finding
        parts, ok = [f"RAISED {type(exc).__name__}: {str(exc)[:200]}"], False
    if not ok:
        failures.append(name)
    say(f"{'ok ' if ok else 'BAD'} {name}: " + "; ".join(parts))


def attention_case(rng, i):
    # The interpreter's bf16 dot is wrong (Triton 3.9): fp16 only on the CPU.
    dtype = rng.choice([torch.float16, torch.bfloat16] if DEVICE == "cuda" else [torch.float16])
    d = rng.choice([16, 32, 64, 64, 80, 96, 128, 128, 256, 40, 8, 24])
    b, hkv = rng.randint(1, 3), rng.randint(1, 3)
    h = hkv * rng.choice([1, 1, 2, 4])
    n_max = 700 if DEVICE == "cuda" else 40
    nq, nk = log_uniform(rng, 1, n_max), log_uniform(rng, 1, n_max)
    if NEAR:
        b, h, n, d = rng.choice(TUNED_ATTENTION)
        # One batch and at most 3000 x 3000 scores per head: the float64 oracle's memory.
        b, hkv = 1, max(1, h // rng.choice([1, 4]))
        nq = min(near(rng, n), 3000)
        nk = nq if rng.random() < 0.5 else min(near(rng, n), 3000)
    causal = rng.random() < 0.5
    layout = rng.choice(["bhnd", "bnhd"])
    lse = rng.random() < 0.5

    def make(heads, n):
        if layout == "bnhd":
            return torch.randn(b, n, heads, d, device=DEVICE, dtype=dtype).transpose(1, 2)
        return torch.randn(b, heads, n, d, device=DEVICE, dtype=dtype)

    q, k, v = make(h, nq), make(hkv, nk), make(hkv, nk)
    name = (f"a{i} B{b} H{h}/{hkv} Nq{nq} Nk{nk} D{d} {str(dtype)[6:]} {layout}"
            f"{' causal' if causal else ''}{' lse' if lse else ''}")
    try:
        res = flashtune.attention(q, k, v, causal=causal, return_lse=lse)
        out, l = res if lse else (res, None)
        msg = check_case(out, l, q, k, v, causal)
    except Exception as exc:  # noqa: BLE001
        msg = f"RAISED {type(exc).__name__}: {str(exc)[:200]}"
    if msg:
        failures.append(name)
    say(f"{'BAD' if msg else 'ok '} {name}{': ' + msg if msg else ''}")


def main():
    n_soft, n_att, seed = (int(a) for a in sys.argv[1:4])
    rng = random.Random(seed)
    torch.manual_seed(seed)
    say(f"device {torch.cuda.get_device_name() if DEVICE == 'cuda' else 'cpu'} torch {torch.__version__} seed {seed}")
    start = time.time()
    for i in range(n_soft):
        softmax_case(rng, i)
    say(f"softmax cases took {time.time() - start:.0f} s")
    start = time.time()
    for i in range(n_att):
        attention_case(rng, i)
    say(f"attention cases took {time.time() - start:.0f} s")
    say(f"\n{len(failures)} failure(s) of {n_soft + n_att}" +
        ("".join(f"\n  {f}" for f in failures) if failures else ""))
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
