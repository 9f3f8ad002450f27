"""Session 36: is the softmax backward faster with its compensated row sum on?

Session 35 saw two backward bench rows run faster when every loop compensated (4096x50257 fp16
2582 against 2253 GB/s). Here every backward case of the benchmark set, with its default
config, runs with the kernel's COMPENSATE forced off and forced on (the variant module's
_compensate helper replaced), interleaved over ROUNDS rounds, each output checked against a
float64 reference. Prints a table: median us of each, and on/off.
Env: DTYPES (default float16,bfloat16,float32), ROUNDS (3), OUT (a folder for the JSON).
"""

import json
import os
import statistics

import torch

from flashtune.gen import load_variant
from flashtune.gen.softmax_space import SoftmaxProblem, default_config
from flashtune.tuner.timing import bench_gpu

SHAPES = [(65536, 128), (16384, 1024), (8192, 4096), (4096, 16384), (1024, 65536),
          (128, 262144), (16, 1048576), (4096, 50257)]
DTYPES = os.environ.get("DTYPES", "float16,bfloat16,float32").split(",")
ROUNDS = int(os.environ.get("ROUNDS", "3"))
sm_count = torch.cuda.get_device_properties(0).multi_processor_count


def reference(y, dy, log):
    y, dy = y.double(), dy.double()
    if log:
        return dy - torch.exp(y) * dy.sum(-1, keepdim=True)
    return y * (dy - (dy * y).sum(-1, keepdim=True))


rows = []
for op in ("softmax_backward", "log_softmax_backward"):
    log = op.startswith("log")
    for dtype_name in DTYPES:
        dtype = getattr(torch, dtype_name)
        for n_rows, n_cols in SHAPES:
            cfg = default_config(op, SoftmaxProblem(n_rows, n_cols, dtype_name), sm_count=sm_count)
            mod = load_variant(op, cfg)
            if not hasattr(mod, "_compensate"):
                rows.append(dict(op=op, dtype=dtype_name, shape=f"{n_rows}x{n_cols}",
                                 regime=cfg["regime"], note="no COMPENSATE"))
                continue
            g = torch.Generator(device="cuda").manual_seed(0)
            x = torch.randn(n_rows, n_cols, device="cuda", dtype=dtype, generator=g)
            y = (torch.log_softmax if log else torch.softmax)(x, -1)
            dy = torch.randn(n_rows, n_cols, device="cuda", dtype=dtype, generator=g)
            del x
            dx = torch.empty_like(y)
            ref = reference(y, dy, log)
            policy = mod._compensate
            times = {"off": [], "on": []}
            errs = {}
            for _ in range(ROUNDS):
                for mode, fn in (("off", lambda n: False), ("on", lambda n: True)):
                    mod._compensate = fn
                    mod.launch(y, dy, dx)
                    torch.cuda.synchronize()
                    errs[mode] = (dx.double() - ref).abs().max().item()
                    times[mode].append(bench_gpu(lambda: mod.launch(y, dy, dx), 25, 100)[0])
            mod._compensate = policy
            off, on = statistics.median(times["off"]), statistics.median(times["on"])
            chunks = -(-n_cols // cfg["block"]) if cfg["regime"] == "online" else None
            rows.append(dict(op=op, dtype=dtype_name, shape=f"{n_rows}x{n_cols}",
                             regime=cfg["regime"], block=cfg["block"],
                             lane_stats=cfg.get("lane_stats"), warps=cfg["num_warps"],
                             splits=cfg.get("splits"), policy_on=bool(policy(chunks or 0)),
                             off_us=off * 1e3, on_us=on * 1e3, ratio=off / on,
                             err_off=errs["off"], err_on=errs["on"], times=times))
            r = rows[-1]
            print(f"{op:22s} {dtype_name:9s} {r['shape']:12s} {r['regime']:6s} b={r['block']:<6d} "
                  f"lane={r['lane_stats']!s:5s} w={r['warps']:<2d} off {r['off_us']:8.1f} "
                  f"on {r['on_us']:8.1f} off/on {r['ratio']:.3f} err {errs['off']:.1e}/{errs['on']:.1e}",
                  flush=True)
            del y, dy, dx, ref
            torch.cuda.empty_cache()

out = os.environ.get("OUT")
if out:
    with open(os.path.join(out, "bwd_compensate.json"), "w") as f:
        json.dump(rows, f, indent=1)
