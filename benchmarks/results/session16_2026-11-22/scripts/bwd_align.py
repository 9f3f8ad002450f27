"""A/B of the backward's aligned walk on rows of odd width: default config with align on/off,
and a few neighbours, against torch's aten backward. do_bench medians (L2 flushed)."""
import itertools, sys, time
import torch
from flashtune.gen.softmax_space import OPS, SoftmaxProblem, default_config
from flashtune.gen.softmax_ops import softmax_backward
from flashtune.gen import load_variant
from flashtune.dispatch.plans import aten_backward
from flashtune.reference import softmax_backward_ref, check_accuracy, softmax_backward_scale
from flashtune.tuner.timing import bench_gpu

SHAPES = [(4096, 50257), (1000, 33333), (2048, 40001), (512, 100003)]
if len(sys.argv) > 1:  # e.g. 4096x50257,1000x33333
    SHAPES = [tuple(int(v) for v in s.split("x")) for s in sys.argv[1].split(",")]
DTYPES = [torch.float16, torch.bfloat16, torch.float32]
rows_out = []
print(torch.cuda.get_device_name(), torch.__version__, flush=True)
for (r, c), dt, op in itertools.product(SHAPES, DTYPES, ("softmax_backward", "log_softmax_backward")):
    log = OPS[op].log
    prob = SoftmaxProblem(r, c, str(dt)[6:])
    base = default_config(op, prob).as_dict()
    x = torch.randn(r, c, device="cuda", dtype=torch.float32).to(dt)
    y = (torch.log_softmax if log else torch.softmax)(x, -1)
    dy = torch.randn_like(y)
    dx = torch.empty_like(y)
    peer_fn = aten_backward(log)
    peer = peer_fn(dy, y, -1, dt)
    ref = softmax_backward_ref(y, dy, -1, log=log)
    t_torch = bench_gpu(lambda: peer_fn(dy, y, -1, dt), 25, 200)[0]
    variants = {
        "default": dict(base),
        "noalign": dict(base, align=False),
        "b8192": dict(base, block=8192),
        "b8192_noalign": dict(base, block=8192, align=False),
        "w16": dict(base, num_warps=16),
        "b8192_w16": dict(base, block=8192, num_warps=16),
        "chunkstats": dict(base, lane_stats=False),
        "st2": dict(base, num_stages=2),
    }
    line = [f"{op[:11]:11s} {r}x{c} {str(dt)[6:]:8s} torch {t_torch*1e3:8.1f}us"]
    for name, raw in variants.items():
        cfg = OPS[op].space.validate(raw)
        mod = load_variant(op, cfg)
        mod.launch(y, dy, dx)
        torch.cuda.synchronize()
        acc = check_accuracy(dx, ref, peer, slack_ulps=2.0 + 17, scale=softmax_backward_scale(y, dy, -1, log=log))
        t = bench_gpu(lambda: mod.launch(y, dy, dx), 25, 200)[0]
        line.append(f"{name} {t*1e3:7.1f} ({t_torch/t:.2f}x){'' if acc.ok else ' WRONG'}")
    print(" | ".join(line), flush=True)
