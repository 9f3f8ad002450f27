"""Backward online-regime configs on long rows, against the current default and torch's
backward, same run (do_bench medians, L2 flushed). Kernel launch via run_variant (GPU-bound
sizes only). Each config is checked against float64 first."""
import itertools, sys, torch, triton
from triton.testing import do_bench
from flashtune.gen import run_variant
from flashtune.gen.softmax_space import OPS, SoftmaxProblem, default_config, problem_misfit
from flashtune.reference import check_accuracy, softmax_backward_ref, softmax_backward_scale
aten = torch.ops.aten
print(torch.cuda.get_device_name(), torch.__version__, triton.__version__, flush=True)
shapes = [(4096, 50257), (1024, 65536), (2048, 40000)]
results = []
for op in ("log_softmax_backward",):
    log = op.startswith("log")
    tfn = aten._log_softmax_backward_data if log else aten._softmax_backward_data
    space = OPS[op].space
    for dt in (torch.float16,):
        dname = str(dt)[6:]
        base = default_config(op, SoftmaxProblem(4096, 50257, dname)).as_dict()
        cands = [base]
        pairs = ((4096, 8), (4096, 16), (8192, 8), (8192, 16), (8192, 32), (16384, 16), (16384, 32))
        for (block, warps), stages, lane in itertools.product(pairs, (1, 2), (False, True)):
            raw = dict(base, block=block, num_warps=warps, num_stages=stages, lane_stats=lane)
            if space.is_valid(raw) and raw not in cands:
                cands.append(raw)
        for (r, c) in shapes[:1]:
            x = torch.randn(r, c, device="cuda", dtype=dt)
            y = (torch.log_softmax if log else torch.softmax)(x, -1)
            dy = torch.randn_like(y)
            dx = torch.empty_like(y)
            ref = softmax_backward_ref(y, dy, -1, log)
            peer = tfn(dy, y, -1, dt)
            scale = softmax_backward_scale(y, dy, -1, log)
            t_torch = do_bench(lambda: tfn(dy, y, -1, dt), warmup=25, rep=100, return_mode="median")
            row = []
            for cfg in cands:
                config = space.validate(cfg)
                if problem_misfit(config, SoftmaxProblem(r, c, dname)):
                    continue
                try:
                    dx.fill_(float("nan"))
                    run_variant(op, config, y, dy, dx)
                    acc = check_accuracy(dx, ref, peer, scale=scale)
                    if not acc.ok:
                        print("INACCURATE", op, dname, r, c, cfg, acc, flush=True)
                        continue
                    t = do_bench(lambda: run_variant(op, config, y, dy, dx), warmup=25, rep=100, return_mode="median")
                except Exception as e:  # noqa: BLE001
                    print("FAILED", cfg, type(e).__name__, str(e)[:100], flush=True)
                    continue
                row.append((t, cfg is base, cfg))
            row.sort(key=lambda a: a[0])
            t_def = [a[0] for a in row if a[1]][0]
            best = row[0]
            b = best[2]
            print(f"{op:>21} {dname:>8} {r}x{c}: torch {t_torch*1e3:7.1f} default {t_def*1e3:7.1f} ({t_torch/t_def:.2f}x torch) "
                  f"best {best[0]*1e3:7.1f} ({t_torch/best[0]:.2f}x) b{b['block']} w{b['num_warps']} st{b['num_stages']} lane{int(b['lane_stats'])}", flush=True)
            for t, isdef, cfg in row[:6]:
                print(f"      {t*1e3:7.1f} b{cfg['block']} w{cfg['num_warps']} st{cfg['num_stages']} lane{int(cfg['lane_stats'])}{' DEFAULT' if isdef else ''}", flush=True)
            del x, y, dy, dx, ref, peer
