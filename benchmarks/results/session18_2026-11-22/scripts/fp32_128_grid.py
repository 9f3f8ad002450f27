"""Row configs for fp32 rows of 128 columns (GRID_CASES: other shapes) (65536x128 of the benchmark set ran at 0.99x
torch.softmax on the H200 with the default, rows=8 warps=2), through the fast launch path,
in interleaved rounds next to torch.softmax. do_bench medians (L2 flushed), 25 ms warm-up,
100 ms of repetitions; us, median over rounds."""
import itertools
import statistics

import torch

from flashtune.dispatch.fast_launch import accelerate
from flashtune.gen import load_variant
from flashtune.gen.softmax_space import OPS, SoftmaxProblem, default_config
from flashtune.tuner.timing import bench_gpu


def t(fn):
    return bench_gpu(fn, 25, 100)[0] * 1e3


def main():
    print(torch.cuda.get_device_name(), torch.__version__, flush=True)
    import os
    cases = [((65536, 128), "float32"), ((200000, 128), "float32"), ((65536, 128), "float16")]
    if os.environ.get("GRID_CASES"):  # e.g. 200000x64:float32,65536x32:float32
        cases = [(tuple(int(v) for v in s.split(":")[0].split("x")), s.split(":")[1])
                 for s in os.environ["GRID_CASES"].split(",")]
    for (r, c), dname in cases:
        dt = getattr(torch, dname)
        x = torch.randn(r, c, device="cuda").to(dt)
        ref = torch.softmax(x.double(), -1)
        base = default_config("softmax", SoftmaxProblem(r, c, dname)).as_dict()
        fns = {"torch": lambda: torch.softmax(x, -1)}
        y = torch.empty_like(x)
        for rows, warps in itertools.product((2, 4, 8, 16, 32, 64), (1, 2, 4, 8)):
            if c * rows < 32 * warps or c * rows > 8192:
                continue
            cfg = dict(base, rows_per_program=rows, num_warps=warps)
            launch = accelerate(load_variant("softmax", OPS["softmax"].space.validate(cfg)).launch)
            launch(x, y)
            torch.cuda.synchronize()
            err = (y.double() - ref).abs().max().item()
            tag = f"r{rows}w{warps}" + ("*" if (rows, warps) == (base["rows_per_program"], base["num_warps"]) else "")
            if err > 1e-2:
                print(tag, "WRONG", err)
                continue
            fns[tag] = (lambda launch=launch: launch(x, y))
        times = {k: [] for k in fns}
        for _ in range(3):
            for k, fn in fns.items():
                times[k].append(t(fn))
        med = {k: statistics.median(v) for k, v in times.items()}
        order = sorted(med, key=med.get)
        print(f"{r}x{c} {dname}: " + " | ".join(f"{k} {med[k]:.1f}" for k in order), flush=True)


if __name__ == "__main__":
    main()
