"""The new backward default (chunks of 16384, 32 warps, per-lane statistics) against the old one
(chunks of 4096, 8 warps, 2 stages, per-chunk statistics) and torch's backward, on the long-row
cases of the H100 sweep; do_bench medians (L2 flushed), launch via run_variant; each output
checked against float64 first."""
import torch, triton
from triton.testing import do_bench
from flashtune.gen import run_variant
from flashtune.gen.softmax_space import OPS, SoftmaxProblem, default_config
from flashtune.reference import check_accuracy, softmax_backward_ref, softmax_backward_scale
aten = torch.ops.aten
print(torch.cuda.get_device_name(), torch.__version__, triton.__version__, flush=True)
print(f"{'op':>21} {'dtype':>8} {'shape':>11} {'torch':>8} {'old':>8} {'new':>8} {'new/old':>7} {'x torch':>7}")
for op in ("log_softmax_backward", "softmax_backward"):
    log = op.startswith("log")
    tfn = aten._log_softmax_backward_data if log else aten._softmax_backward_data
    space = OPS[op].space
    for dt in (torch.float16, torch.float32):
        dname = str(dt)[6:]
        for (r, c) in ((4096, 50257), (1024, 65536), (2048, 40000)):
            new = default_config(op, SoftmaxProblem(r, c, dname))
            old = space.validate(dict(new.as_dict(), block=4096, num_warps=8, num_stages=2, lane_stats=False))
            x = torch.randn(r, c, device="cuda", dtype=dt)
            y = (torch.log_softmax if log else torch.softmax)(x, -1)
            dy = torch.randn_like(y)
            dx = torch.empty_like(y)
            ref = softmax_backward_ref(y, dy, -1, log)
            peer = tfn(dy, y, -1, dt)
            scale = softmax_backward_scale(y, dy, -1, log)
            times = {}
            for name, cfg in (("old", old), ("new", new)):
                dx.fill_(float("nan"))
                run_variant(op, cfg, y, dy, dx)
                assert check_accuracy(dx, ref, peer, scale=scale).ok, (op, dname, r, c, name)
                times[name] = do_bench(lambda: run_variant(op, cfg, y, dy, dx), warmup=25, rep=100, return_mode="median")
            t_torch = do_bench(lambda: tfn(dy, y, -1, dt), warmup=25, rep=100, return_mode="median")
            print(f"{op:>21} {dname:>8} {r:>5}x{c:<5} {t_torch*1e3:8.1f} {times['old']*1e3:8.1f} {times['new']*1e3:8.1f} "
                  f"{times['new']/times['old']:7.2f} {t_torch/times['new']:7.2f}", flush=True)
            del x, y, dy, dx, ref, peer
