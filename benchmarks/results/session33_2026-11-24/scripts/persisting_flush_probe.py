"""Session 33: how much of an l2_hint config's time comes from x kept in L2 across do_bench's
flush? (evict_last lines survive the 256 MB zero_: evict_last_probe.py.)

Each kernel timed three ways, interleaved, 3 rounds, medians:
  do_bench   triton.testing.do_bench (warm-up 10 ms, 50 ms of repetitions, zero_ flush)
  loop       our own loop: sync; a GPU sleep (so the launch is queued before the GPU gets
             to it); the same zero_ flush; events around one launch (the control: should
             read as do_bench)
  loop+reset the same with cudaCtxResetPersistingL2Cache after the sync: every repetition
             starts with no persisting (evict_last) line in L2
"""
import ctypes
import glob
import os
import statistics

import torch
import triton
import triton.testing

from flashtune.gen import load_variant
from flashtune.gen.softmax_space import OPS, SoftmaxProblem, default_config

space = OPS["softmax"].space
SMS = torch.cuda.get_device_properties(0).multi_processor_count


def load_cudart():
    pats = [os.path.join(os.path.dirname(torch.__file__), "lib", "libcudart*.so*"),
            "/usr/local/cuda/lib64/libcudart.so*"]
    try:
        import nvidia.cuda_runtime as ncr
        pats.insert(0, os.path.join(list(ncr.__path__)[0], "lib", "libcudart.so*"))
    except Exception:  # noqa: BLE001
        pass
    for pat in pats:
        for path in sorted(glob.glob(pat)):
            try:
                return ctypes.CDLL(path)
            except OSError:
                pass
    raise RuntimeError("no libcudart")


RT = load_cudart()
CACHE = torch.empty(int(256e6 // 4), dtype=torch.int, device="cuda")


def loop(fn, reset, reps=150):
    for _ in range(5):
        fn()
    starts = [torch.cuda.Event(enable_timing=True) for _ in range(reps)]
    ends = [torch.cuda.Event(enable_timing=True) for _ in range(reps)]
    for i in range(reps):
        torch.cuda.synchronize()
        if reset:
            assert RT.cudaCtxResetPersistingL2Cache() == 0
        torch.cuda._sleep(200_000)
        CACHE.zero_()
        starts[i].record()
        fn()
        ends[i].record()
    torch.cuda.synchronize()
    return statistics.median(s.elapsed_time(e) for s, e in zip(starts, ends)) * 1e3


def dob(fn):
    return triton.testing.do_bench(fn, warmup=10, rep=50, return_mode="median") * 1e3


def main():
    DT = {"float16": torch.float16, "bfloat16": torch.bfloat16}
    CASES = [
        (4096, 1000, "float16", {"default (row)": {},
                                 "split max_pass hint": dict(regime="split", block=1024, splits=2, num_warps=4,
                                                             num_stages=3, max_pass=True, l2_hint=True,
                                                             rows_per_program=1)}),
        (16, 1048576, "float16", {"default (hint)": {}, "default, no hint": dict(l2_hint=False)}),
        (128, 262144, "float16", {"default (hint)": {}, "default, no hint": dict(l2_hint=False)}),
        (4096, 16384, "float16", {"default (hint)": {}, "default, no hint": dict(l2_hint=False)}),
        (4096, 50257, "bfloat16", {"default (hint)": {}, "default, no hint": dict(l2_hint=False)}),
    ]
    big = torch.empty(1 << 30, dtype=torch.uint8, device="cuda")
    big2 = torch.empty_like(big)
    copy = statistics.median(2 * big.numel() / (dob(lambda: big2.copy_(big)) * 1e-6) / 1e9 for _ in range(3))
    del big, big2
    print(f"device {torch.cuda.get_device_name()}; copy 1 GiB {copy:.0f} GB/s", flush=True)
    for rows, cols, dt, variants in CASES:
        prob = SoftmaxProblem(rows, cols, dt)
        base = default_config("softmax", prob, sm_count=SMS).as_dict()
        x = torch.randn(rows, cols, device="cuda", dtype=DT[dt])
        y = torch.empty_like(x)
        fns = {}
        for name, change in variants.items():
            cfg = space.validate(dict(base, **change))
            mod = load_variant("softmax", cfg)
            fns[name] = (lambda m=mod: m.launch(x, y))
            if name.startswith("default"):
                fns[name + " " + str({k: v for k, v in cfg.as_dict().items() if k in ("regime", "l2_hint")})] = fns.pop(name)
        fns["torch.softmax"] = lambda: torch.softmax(x, -1)
        ref = torch.softmax(x.double(), -1)
        for name, f in fns.items():
            f()
            torch.cuda.synchronize()
            err = (y.double() - ref).abs().max().item() if name != "torch.softmax" else 0.0
            assert err < 1e-2, (name, err)
        res = {n: {"do_bench": [], "loop": [], "loop+reset": []} for n in fns}
        for _ in range(3):
            for n, f in fns.items():
                RT.cudaCtxResetPersistingL2Cache()
                res[n]["do_bench"].append(dob(f))
                RT.cudaCtxResetPersistingL2Cache()
                res[n]["loop"].append(loop(f, False))
                res[n]["loop+reset"].append(loop(f, True))
        nbytes = 2 * x.numel() * x.element_size()
        print(f"== {rows}x{cols} {dt}")
        for n, r in res.items():
            cells = "  ".join(f"{k} {statistics.median(v):8.2f} us ({100 * nbytes / (statistics.median(v) * 1e-6) / 1e9 / copy:3.0f}%)"
                              for k, v in r.items())
            print(f"  {n:52s} {cells}", flush=True)
        del x, y, ref
        torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
