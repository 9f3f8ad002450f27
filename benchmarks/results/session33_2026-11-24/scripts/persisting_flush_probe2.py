"""Session 33, second probe: which scrub clears the evict_last lines (the context reset, or
streaming 2 GiB through L2), and are the l2_hint defaults' own times the same when every
repetition starts after the 1 GiB copy (which cleared them in evict_last_probe.py)?"""
import statistics
import sys

import torch

sys.path.insert(0, "benchmarks/results/session33_2026-11-24/scripts")
from persisting_flush_probe import CACHE, RT, SMS, dob, space  # noqa: E402

from flashtune.gen import load_variant  # noqa: E402
from flashtune.gen.softmax_space import SoftmaxProblem, default_config  # noqa: E402

big = torch.empty(1 << 30, dtype=torch.uint8, device="cuda")
big2 = torch.empty_like(big)


def loop(fn, flush, reps=100):
    for _ in range(5):
        fn()
    starts = [torch.cuda.Event(enable_timing=True) for _ in range(reps)]
    ends = [torch.cuda.Event(enable_timing=True) for _ in range(reps)]
    for i in range(reps):
        torch.cuda.synchronize()
        torch.cuda._sleep(200_000)
        flush()
        starts[i].record()
        fn()
        ends[i].record()
    torch.cuda.synchronize()
    return statistics.median(s.elapsed_time(e) for s, e in zip(starts, ends)) * 1e3


prob = SoftmaxProblem(4096, 1000, "float16")
D = default_config("softmax", prob, sm_count=SMS).as_dict()
H = dict(D, regime="split", block=1024, splits=2, num_warps=4, num_stages=3, max_pass=True,
         l2_hint=True, rows_per_program=1)
x = torch.randn(4096, 1000, device="cuda", dtype=torch.float16)
y = torch.empty_like(x)
d, h = (load_variant("softmax", space.validate(c)) for c in (D, H))
fd, fh = (lambda: d.launch(x, y)), (lambda: h.launch(x, y))
fd(); fh(); torch.cuda.synchronize()
for rnd in range(2):
    for name, scrub in (("nothing", lambda: None), ("context reset", lambda: RT.cudaCtxResetPersistingL2Cache()),
                        ("1 GiB copy", lambda: big2.copy_(big))):
        big2.copy_(big); torch.cuda.synchronize(); RT.cudaCtxResetPersistingL2Cache()
        clean = dob(fd)
        fh(); torch.cuda.synchronize()
        scrub(); torch.cuda.synchronize()
        print(f"D clean {clean:6.2f} us; after one H launch then {name:14s}: D {dob(fd):6.2f} us", flush=True)
del x, y
for rows, cols in ((16, 1048576), (128, 262144), (4096, 16384)):
    prob = SoftmaxProblem(rows, cols, "float16")
    cfg = default_config("softmax", prob, sm_count=SMS)
    mod = load_variant("softmax", cfg)
    x = torch.randn(rows, cols, device="cuda", dtype=torch.float16)
    y = torch.empty_like(x)
    f = lambda: mod.launch(x, y)  # noqa: E731
    zero = lambda: CACHE.zero_()  # noqa: E731
    copy = lambda: big2.copy_(big)  # noqa: E731
    both = lambda: (big2.copy_(big), CACHE.zero_())  # noqa: E731
    out = {k: [] for k in ("zero_ flush", "1 GiB copy flush", "copy then zero_")}
    for _ in range(3):
        for k, fl in zip(out, (zero, copy, both)):
            out[k].append(loop(f, fl))
    print(f"{rows}x{cols} fp16 default (l2_hint={cfg['l2_hint']}): " + "  ".join(
        f"{k} {statistics.median(v):6.2f} us" for k, v in out.items()), flush=True)
