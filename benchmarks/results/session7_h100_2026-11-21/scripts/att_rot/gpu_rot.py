"""GPU experiment: do rotated (software-pipelined) key loops speed up the attention forward?

Run on the GPU machine from the repo root:
    PYTHONPATH=$PWD python scratch/att_rot/gpu_rot.py $OUT
Sanity check on CPU (imports + the case list, no kernels):
    /work/venv/bin/python scratch/att_rot/gpu_rot.py --dry

Per shape: every kind of rot_kernels x CONFIGS, flashtune's template at TEMPLATE_CONFIGS
("tmpl", same loop as "base": checks that base is a faithful model), flashtune.attention with
whatever its dispatcher picks ("flashtune"), and SDPA's cuDNN backend ("cudnn"). Each is
checked against SDPA's math backend in fp32 (max abs err < 2e-2) and timed with
triton.testing.do_bench(warmup=25, rep=100, median). Kernels are compiled first, in parallel
worker processes that fill Triton's on-disk cache, so the timing loop never compiles.
Writes $OUT/gpu_rot.json (all rows + environment) and $OUT/gpu_rot.log; prints the table last.
"""
import argparse
import concurrent.futures as cf
import json
import multiprocessing as mp
import os
import sys
import time
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)
if REPO not in sys.path:
    sys.path.insert(1, REPO)  # flashtune, also when PYTHONPATH is not set

import torch  # noqa: E402
import triton  # noqa: E402

import rot_kernels  # noqa: E402

SHAPES = [  # ((B, H, N, D), dtype), all non-causal
    ((2, 16, 16384, 128), "float16"),
    ((8, 16, 4096, 128), "float16"),
    ((2, 32, 16384, 64), "float16"),
    ((2, 16, 16384, 128), "bfloat16"),
]
CONFIGS = [  # (BLOCK_M, BLOCK_N, num_warps, num_stages)
    (128, 128, 8, 3), (128, 128, 8, 2), (128, 64, 8, 3),
    (128, 64, 8, 2), (128, 64, 4, 3), (64, 64, 4, 3),
]
TEMPLATE_CONFIGS = [(128, 128, 8, 3), (128, 64, 8, 2)]  # flashtune's best known on H100
MAX_ERR = 2e-2
BUDGET_S = 250.0  # no new work starts after this many seconds (whole run well under 5 min)
COMPILE_SHAPE_N = 2048  # compile runs: N (and N // BLOCK_M) divisible by 16 like the real runs
DEVICE = "cuda"  # the CPU smoke test (test_gpu_rot_smoke.py) swaps in "cpu"
T0 = time.time()


def elapsed():
    return time.time() - T0


def _sync():
    if DEVICE == "cuda":
        torch.cuda.synchronize()


def cfg_name(cfg):
    return "-" if cfg is None else f"{cfg[0]}x{cfg[1]}w{cfg[2]}s{cfg[3]}"


def shape_name(shape, dtype):
    return "x".join(map(str, shape)) + (" f16" if dtype == "float16" else " bf16")


def template_config(cfg):
    from flashtune.gen import validate_config

    bm, bn, warps, stages = cfg
    return validate_config("attention_fwd", {
        "BLOCK_M": bm, "BLOCK_N": bn, "num_warps": warps, "num_stages": stages, "exp2": True,
        "pv_acc": "fp32", "persistent": False, "tma": False, "warp_specialize": False})


def variants(kinds):
    """(kind, cfg) per shape, in run order."""
    out = [(kind, cfg) for kind in kinds for cfg in CONFIGS]
    out += [("tmpl", cfg) for cfg in TEMPLATE_CONFIGS]
    out += [("flashtune", None), ("cudnn", None)]
    return out


def compile_jobs(kinds):
    """Distinct compiled kernels: (kind, cfg, dtype, D). flashtune/cudnn compile in the main run."""
    seen = []
    for shape, dtype in SHAPES:
        for kind, cfg in variants(kinds):
            job = (kind, cfg, dtype, shape[3])
            if cfg is not None and job not in seen:
                seen.append(job)
    return seen


def call(kind, cfg, q, k, v):
    """One forward: (o, info) where info holds the kernel's registers/spills when known."""
    if kind in rot_kernels.KINDS:
        return rot_kernels.launch(kind, q, k, v, *cfg)
    if kind == "tmpl":
        from flashtune.gen.attention_ops import attention_forward

        return attention_forward(q, k, v, config=template_config(cfg)), {}
    if kind == "flashtune":
        import flashtune

        return flashtune.attention(q, k, v), {}
    if kind == "cudnn":
        from torch.nn.attention import SDPBackend, sdpa_kernel

        with sdpa_kernel([SDPBackend.CUDNN_ATTENTION]):
            return torch.nn.functional.scaled_dot_product_attention(q, k, v), {}
    raise ValueError(f"kind: unknown {kind!r}")


def _compile_job(job):
    """Worker process: one launch on small inputs with the real run's specialization."""
    kind, cfg, dtype, d = job
    t = time.time()
    try:
        q, k, v = (torch.randn(1, 16, COMPILE_SHAPE_N, d, device=DEVICE, dtype=getattr(torch, dtype))
                   for _ in range(3))
        _, info = call(kind, cfg, q, k, v)
        _sync()
        return job, None, info, time.time() - t
    except Exception as err:  # noqa: BLE001 - reported by the parent, never fatal
        return job, f"{type(err).__name__}: {err}"[:600], {}, time.time() - t


class Log:
    def __init__(self, path):
        self.f = open(path, "a", encoding="utf-8") if path else None

    def __call__(self, msg, echo=True):
        line = f"[{elapsed():6.1f}s] {msg}"
        if self.f:
            self.f.write(line + "\n")
            self.f.flush()
        if echo:
            print(line, flush=True)


def parallel_compile(jobs, log, workers, deadline):
    """Fill Triton's disk cache from worker processes; returns {job: error or None}."""
    results = {}
    if workers <= 1 or not jobs:
        return results
    ctx = mp.get_context("spawn")  # fresh CUDA context per worker (fork would break CUDA)
    pool = cf.ProcessPoolExecutor(max_workers=workers, mp_context=ctx)
    futures = [pool.submit(_compile_job, job) for job in jobs]
    timed_out = False
    try:
        for fut in cf.as_completed(futures, timeout=max(1.0, deadline - elapsed())):
            try:
                job, err, info, secs = fut.result()
            except Exception as exc:  # a crashed worker (BrokenProcessPool): main compiles
                log(f"compile worker failed: {type(exc).__name__}: {exc}")
                continue
            results[job] = err
            log(f"compiled {job[0]:8s} {cfg_name(job[1])} {job[2]} D={job[3]} in {secs:5.1f}s "
                f"{info if not err else 'FAILED: ' + err}", echo=bool(err))
    except cf.TimeoutError:
        timed_out = True
        log(f"parallel compile deadline hit; {len(jobs) - len(results)} jobs left to the main run")
    finally:
        procs = list((getattr(pool, "_processes", None) or {}).values())  # our own workers
        pool.shutdown(wait=not timed_out, cancel_futures=True)
        if timed_out:  # a worker stuck in a compile must not hold the run at exit
            for proc in procs:
                if proc.is_alive():
                    proc.terminate()
    return results


def reference(q, k, v):
    """SDPA math backend in fp32, a few heads at a time (full scores of N=16384 are 1 GiB/head)."""
    from torch.nn.attention import SDPBackend, sdpa_kernel

    b, h, n, d = q.shape
    qf, kf, vf = (t.reshape(b * h, n, d) for t in (q, k, v))
    out = torch.empty((b * h, n, d), dtype=torch.float32, device=q.device)
    chunk = max(1, (1 << 31) // (n * n * 4))
    with sdpa_kernel([SDPBackend.MATH]):
        for i in range(0, b * h, chunk):
            s = slice(i, i + chunk)
            out[s] = torch.nn.functional.scaled_dot_product_attention(
                qf[s].float()[None], kf[s].float()[None], vf[s].float()[None])[0]
    return out.view(b, h, n, d)


def run_shape(shape, dtype, kinds, log, compile_errors):
    b, h, n, d = shape
    flops = 4.0 * b * h * n * n * d
    torch.manual_seed(0)
    q, k, v = (torch.randn(shape, device=DEVICE, dtype=getattr(torch, dtype)) for _ in range(3))
    ref = reference(q, k, v)
    rows = []
    # Phase 1: warm-up (compile or load from disk cache) + correctness, for every variant.
    for kind, cfg in variants(kinds):
        row = {"shape": list(shape), "dtype": dtype, "kind": kind,
               "config": None if cfg is None else list(cfg), "status": "ok", "max_err": None,
               "ms": None, "tflops": None, "n_regs": None, "n_spills": None, "shared": None,
               "error": None}
        rows.append(row)
        if elapsed() > BUDGET_S:
            row["status"], row["error"] = "skipped", "time budget"
            continue
        job = (kind, cfg, dtype, d)
        if compile_errors.get(job):
            row["status"], row["error"] = "error", compile_errors[job]
            continue
        try:
            o, info = call(kind, cfg, q, k, v)
            _sync()
            row.update({key: info.get(key) for key in ("n_regs", "n_spills", "shared")})
            err = (o.float() - ref).abs().max().item()
            row["max_err"] = err
            if not err < MAX_ERR:  # NaN fails too
                row["status"] = "wrong"
            del o
        except Exception as exc:  # noqa: BLE001 - log and go on with the next variant
            row["status"], row["error"] = "error", f"{type(exc).__name__}: {exc}"[:600]
            log(f"{shape_name(shape, dtype)} {kind} {cfg_name(cfg)}: {row['error']}")
            log(traceback.format_exc(), echo=False)
    del ref
    # Phase 2: timing (nothing compiles here any more).
    for row in rows:
        if row["status"] not in ("ok", "wrong"):
            continue
        if elapsed() > BUDGET_S:
            row["status"], row["error"] = "skipped", "time budget (timing)"
            continue
        kind, cfg = row["kind"], None if row["config"] is None else tuple(row["config"])
        try:
            ms = triton.testing.do_bench(lambda: call(kind, cfg, q, k, v), warmup=25, rep=100,
                                         return_mode="median")
            row["ms"], row["tflops"] = ms, flops / (ms * 1e-3) / 1e12
        except Exception as exc:  # noqa: BLE001
            row["status"], row["error"] = "error", f"timing: {type(exc).__name__}: {exc}"[:600]
        log(f"{shape_name(shape, dtype)} {kind:9s} {cfg_name(cfg):12s} "
            f"{row['tflops'] or 0:7.1f} TFLOP/s err={row['max_err']} regs={row['n_regs']} "
            f"spills={row['n_spills']}", echo=False)
    return rows  # q, k, v are freed here; main() empties the CUDA cache


def table(rows):
    lines = [f"{'shape':20s} {'kind':9s} {'config':12s} {'TFLOP/s':>8s} {'max_err':>8s} "
             f"{'regs':>4s} {'spill':>5s} status"]
    for r in rows:
        cfg = None if r["config"] is None else tuple(r["config"])
        tf = f"{r['tflops']:8.1f}" if r["tflops"] else f"{'-':>8s}"
        err = f"{r['max_err']:8.1e}" if r["max_err"] is not None else f"{'-':>8s}"
        regs = "-" if r["n_regs"] is None else str(r["n_regs"])
        spills = "-" if r["n_spills"] is None else str(r["n_spills"])
        status = r["status"] if r["status"] == "ok" else f"{r['status']}: {(r['error'] or '')[:40]}"
        lines.append(f"{shape_name(r['shape'], r['dtype']):20s} {r['kind']:9s} {cfg_name(cfg):12s} "
                     f"{tf} {err} {regs:>4s} {spills:>5s} {status}")
    return lines


def best_per_kind(rows):
    lines = ["best per shape and kind:"]
    seen = []
    for r in rows:
        key = (tuple(r["shape"]), r["dtype"])
        if key not in seen:
            seen.append(key)
    for shape, dtype in seen:
        parts = []
        for kind in dict.fromkeys(r["kind"] for r in rows):
            timed = [r for r in rows if (tuple(r["shape"]), r["dtype"]) == (shape, dtype)
                     and r["kind"] == kind and r["tflops"] and r["status"] == "ok"]
            if timed:
                best = max(timed, key=lambda r: r["tflops"])
                cfg = None if best["config"] is None else tuple(best["config"])
                parts.append(f"{kind} {best['tflops']:.0f}" + (f" ({cfg_name(cfg)})" if cfg else ""))
        lines.append(f"  {shape_name(shape, dtype)}: " + ", ".join(parts))
    return lines


def environment():
    env = {"torch": torch.__version__, "triton": triton.__version__, "cuda": torch.version.cuda}
    if torch.cuda.is_available():
        env["device"] = torch.cuda.get_device_name()
    return env


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", nargs="?", help="output folder ($OUT)")
    parser.add_argument("--dry", action="store_true", help="imports and the case list only (CPU)")
    parser.add_argument("--kinds", default=",".join(rot_kernels.KINDS),
                        help=f"comma-separated subset of {rot_kernels.KINDS}")
    parser.add_argument("--workers", type=int, default=min(8, os.cpu_count() or 1),
                        help="parallel compile processes (1: compile in the main run)")
    args = parser.parse_args(argv)
    kinds = [x for x in args.kinds.split(",") if x]
    bad = [x for x in kinds if x not in rot_kernels.KINDS]
    if bad:
        parser.error(f"--kinds: unknown {bad}; choose from {rot_kernels.KINDS}")
    for cfg in TEMPLATE_CONFIGS:
        template_config(cfg)  # a bad template config fails here, also in --dry
    jobs = compile_jobs(kinds)
    n_rows = len(SHAPES) * len(variants(kinds))
    if args.dry:
        print(f"environment: {environment()}")
        print(f"{len(SHAPES)} shapes x {len(variants(kinds))} variants = {n_rows} rows; "
              f"{len(jobs)} compile jobs; kinds {kinds}")
        for shape, dtype in SHAPES:
            print(f"  {shape_name(shape, dtype)}: "
                  + " ".join(f"{kind}:{cfg_name(cfg)}" for kind, cfg in variants(kinds)))
        return 0
    if not args.out:
        parser.error("out: the output folder is required (or pass --dry)")
    if DEVICE == "cuda" and not torch.cuda.is_available():
        print("no CUDA device: use --dry on CPU", file=sys.stderr)
        return 2
    os.makedirs(args.out, exist_ok=True)
    log = Log(os.path.join(args.out, "gpu_rot.log"))
    env = environment()
    log(f"environment: {env}; {n_rows} rows, {len(jobs)} compile jobs, {args.workers} workers")
    compile_errors = parallel_compile(jobs, log, min(args.workers, len(jobs)), deadline=150.0)
    log(f"parallel compile done: {len(compile_errors)}/{len(jobs)} jobs reported, "
        f"{sum(1 for e in compile_errors.values() if e)} failed")
    rows = []
    json_path = os.path.join(args.out, "gpu_rot.json")
    for shape, dtype in SHAPES:
        try:
            rows += run_shape(shape, dtype, kinds, log, compile_errors)
        except Exception as exc:  # noqa: BLE001 - e.g. OOM in the reference: next shape
            log(f"{shape_name(shape, dtype)} failed: {type(exc).__name__}: {exc}")
            log(traceback.format_exc(), echo=False)
        if DEVICE == "cuda":
            torch.cuda.empty_cache()  # the next shape gets the memory of this one
        with open(json_path, "w", encoding="utf-8") as f:  # after every shape: a partial result
            json.dump({"environment": env, "max_err": MAX_ERR, "elapsed_s": elapsed(),
                       "rows": rows}, f, indent=1)
        log(f"{shape_name(shape, dtype)} done")
    lines = table(rows) + [""] + best_per_kind(rows)
    log("\n".join(lines), echo=False)
    print("\n".join(lines))
    print(f"total {elapsed():.0f}s; json: {json_path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
