"""Scratch: softmax variants timed in one run (parallel compile). Tag in argv[1]; the store-hint
A/B/C ran under PYTHONPATH=scratch/pkgX:... with the default set, the stages run with
SM_EXP_SET=stages."""
import json, os, sys, time, subprocess
import torch, triton, triton.testing
from flashtune.gen import load_variant
from flashtune.gen.softmax_space import OPS, SoftmaxProblem, default_config

SPACE = OPS["softmax"].space
DT = {"float16": torch.float16, "bfloat16": torch.bfloat16, "float32": torch.float32}


def cfg(**kw):
    return SPACE.validate(SPACE.complete(kw))


def store_hint_cands():
    """Call 1: the defaults and nearby chunk / warp / split counts (run once per package copy)."""
    out = []
    for dt in ("float16", "float32"):
        for shape in ((16, 1048576), (128, 262144)):
            d = default_config("softmax", SoftmaxProblem(*shape, dt))
            out.append((shape, dt, "default", d))
            for sp in (8, 16, 32):
                for b, w in ((8192, 8), (16384, 16)):
                    out.append((shape, dt, "", cfg(regime="split", block=b, splits=sp, num_warps=w, num_stages=1,
                                                    lane_stats=False, l2_hint=True, fused=True, exp2=True)))
        for shape in ((1024, 65536), (4096, 50257)):
            d = default_config("softmax", SoftmaxProblem(*shape, dt))
            out.append((shape, dt, "default", d))
            for b, w in ((8192, 16), (16384, 32)):
                for lane in (True, False):
                    out.append((shape, dt, "", cfg(**dict(d, block=b, num_warps=w, lane_stats=lane))))
    return out


def stages_cands():
    """Call 6: the fused split's pipelining stages, splits, chunks and warps."""
    out = []
    for dt in ("float16", "float32"):
        for shape in ((16, 1048576), (128, 262144)):
            d = default_config("softmax", SoftmaxProblem(*shape, dt))
            out.append((shape, dt, "default", d))
            for st in (2, 3):
                out.append((shape, dt, "", cfg(**dict(d, num_stages=st))))
            for sp, b, w, st in ((8, 8192, 8, 2), (16, 8192, 8, 2), (8, 4096, 4, 2), (16, 4096, 4, 2),
                                 (8, 4096, 8, 2), (32, 4096, 4, 2), (8, 16384, 16, 2), (32, 8192, 8, 2)):
                c = cfg(**dict(d, splits=sp, block=b, num_warps=w, num_stages=st))
                if c != d:
                    out.append((shape, dt, "", c))
    return out


# SM_EXP_SET picks the candidate set (inherited by the compile subprocesses).
CANDIDATE_SETS = {"store_hint": store_hint_cands, "stages": stages_cands}


def cands():
    return CANDIDATE_SETS[os.environ.get("SM_EXP_SET", "store_hint")]()


def name(c):
    flags = [k for k in ("lane_stats", "l2_hint", "fused", "align", "exp2") if c[k]]
    return f"{c['regime']} b{c['block']} s{c['splits']} w{c['num_warps']} st{c['num_stages']} {','.join(flags)}"


def compile_shard(i, n):
    xs = {}
    for j, (shape, dt, tag, c) in enumerate(cands()):
        if j % n != i:
            continue
        key = (shape, dt)
        if key not in xs:
            xs[key] = (torch.randn(*shape, device="cuda", dtype=DT[dt]), torch.empty(*shape, device="cuda", dtype=DT[dt]))
        x, y = xs[key]
        try:
            load_variant("softmax", c).launch(x, y)
        except Exception as e:
            print("compile fail", name(c), type(e).__name__, str(e)[:200], flush=True)
    torch.cuda.synchronize()


def bench(fn):
    return triton.testing.do_bench(fn, warmup=25, rep=150, return_mode="median")


def main():
    tag = sys.argv[1]
    out_dir = os.environ.get("OUT", "/tmp")
    n = 14
    t0 = time.time()
    procs = [subprocess.Popen([sys.executable, __file__, "--compile", str(i), str(n)]) for i in range(n)]
    for p in procs:
        p.wait()
    print(f"[{tag}] parallel compile {time.time() - t0:.1f}s", flush=True)
    src = torch.empty(1 << 30, dtype=torch.uint8, device="cuda"); dst = torch.empty_like(src)
    copy_gbs = 2 * (1 << 30) / (bench(lambda: dst.copy_(src)) * 1e-3) / 1e9
    print(f"[{tag}] copy {copy_gbs:.0f} GB/s", flush=True)
    del src, dst
    rows = []
    xs = {}
    for shape, dt, t, c in cands():
        key = (shape, dt)
        if key not in xs:
            x = torch.randn(*shape, device="cuda", dtype=DT[dt])
            xs.clear()
            xs[key] = (x, torch.empty_like(x), torch.softmax(x.double(), -1))
            xc = torch.empty_like(x)
            ms_copy = bench(lambda: xc.copy_(x))
            ms_torch = bench(lambda: torch.softmax(x, -1))
            rows.append(dict(shape=shape, dt=dt, name="same-size copy", us=ms_copy * 1e3))
            rows.append(dict(shape=shape, dt=dt, name="torch.softmax", us=ms_torch * 1e3))
        x, y, ref = xs[key]
        mod = load_variant("softmax", c)
        try:
            mod.launch(x, y)
            torch.cuda.synchronize()
            err = (y.double() - ref).abs().max().item()
            ms = bench(lambda: mod.launch(x, y))
        except Exception as e:
            print("fail", name(c), e); continue
        nbytes = 2 * x.numel() * x.element_size()
        rows.append(dict(shape=shape, dt=dt, name=(t + " " + name(c)).strip(), us=ms * 1e3, err=err,
                         pct=100 * nbytes / (ms * 1e-3) / 1e9 / copy_gbs))
    for r in rows:
        print(f"[{tag}] {r['shape'][0]}x{r['shape'][1]} {r['dt']:8s} {r['name']:55s} {r['us']:8.1f} us"
              + (f" {r['pct']:5.1f}% err {r['err']:.1e}" if 'pct' in r else ""), flush=True)
    json.dump(dict(copy_gbs=copy_gbs, rows=rows), open(os.path.join(out_dir, f"sm_{tag}.json"), "w"))


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--compile":
        compile_shard(int(sys.argv[2]), int(sys.argv[3]))
    else:
        main()
