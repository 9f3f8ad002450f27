"""Per-call host overhead of flashtune.softmax vs torch.softmax vs a bare Triton launch.

GPU script (one call on the GPU box):

    python benchmarks/host_overhead.py                 # writes benchmarks/results/host_overhead.{json,md}
    python benchmarks/host_overhead.py --out DIR --shape 4x128 --dtype float16 --iters 20000

Method: small tensors, so the GPU finishes each kernel faster than the host can issue the next
one; each candidate is called ``--iters`` times in a loop with ``torch.cuda.synchronize()`` only
before and after. "host us" is the CPU time per call until the loop returns (launch cost seen
by the Python caller); "wall us" includes draining the GPU queue. Median of ``--repeats``.

Candidates (same input, same kernel variant: the one the dispatcher picks for the shape):
- torch.softmax                          the PyTorch op
- flashtune.softmax                      public op, cache hit (plan lookup + alloc + launch)
- flashtune.softmax (autograd)           input requires grad: goes through torch.ops.flashtune
- torch.ops.flashtune.softmax            the registered torch.library op, no grad
- generated launch() (preallocated out)  the variant module's launch(x, y): no dispatch, no alloc
- bare Triton kernel[grid](...)          the @triton.jit kernel called directly (row regime only)
- torch.empty_like                       the output allocation alone, for reference

The budget: flashtune.softmax on a cache hit <= 10 us per call.

``--allow-cpu`` runs the same code on CPU tensors under TRITON_INTERPRET=1 (a smoke test of this
script: interpreter timings mean nothing).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import time
from pathlib import Path

BUDGET_US = 10.0


def _parse_shape(text: str) -> tuple[int, int]:
    rows, cols = (int(p) for p in text.lower().split("x"))
    return rows, cols


def _time(fn, iters: int, repeats: int, sync) -> tuple[float, float]:
    for _ in range(min(iters, 500)):
        fn()
    sync()
    host, wall = [], []
    for _ in range(repeats):
        sync()
        t0 = time.perf_counter()
        for _ in range(iters):
            fn()
        t1 = time.perf_counter()
        sync()
        t2 = time.perf_counter()
        host.append((t1 - t0) / iters * 1e6)
        wall.append((t2 - t0) / iters * 1e6)
    return statistics.median(host), statistics.median(wall)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", type=Path, default=Path(__file__).resolve().parent / "results")
    ap.add_argument("--shape", type=_parse_shape, default=(4, 128), help="ROWSxCOLS (default 4x128)")
    ap.add_argument("--dtype", choices=("float16", "bfloat16", "float32"), default="float16")
    ap.add_argument("--iters", type=int, default=20000)
    ap.add_argument("--repeats", type=int, default=7)
    ap.add_argument("--allow-cpu", action="store_true", help="smoke-test on CPU (interpreter)")
    args = ap.parse_args(argv)

    if args.allow_cpu:
        os.environ.setdefault("TRITON_INTERPRET", "1")
    import torch
    import triton

    import flashtune
    from flashtune.dispatch import choice
    from flashtune.gen import load_variant, source_path

    if torch.cuda.is_available() and not args.allow_cpu:
        device = torch.device("cuda")
        sync = torch.cuda.synchronize
        device_name = torch.cuda.get_device_name()
    elif args.allow_cpu:
        device, sync, device_name = torch.device("cpu"), (lambda: None), "cpu (Triton interpreter)"
    else:
        print("host_overhead.py needs a CUDA GPU (or --allow-cpu for a smoke test)", file=sys.stderr)
        return 2

    dtype = getattr(torch, args.dtype)
    rows, cols = args.shape
    x = torch.randn(rows, cols, device=device, dtype=dtype)
    xg = x.clone().requires_grad_()
    y = torch.empty_like(x)
    picked = choice("softmax", (rows, cols), args.dtype, device)
    module = load_variant("softmax", picked.config)
    print(f"{device_name}: softmax {rows}x{cols} {args.dtype}: {picked.how} config "
          f"{picked.config.as_dict()}", flush=True)
    torch.testing.assert_close(flashtune.softmax(x).float(), torch.softmax(x.float(), -1),
                               atol=2e-3, rtol=2e-2)

    cands = [
        ("torch.softmax", lambda: torch.softmax(x, -1)),
        ("flashtune.softmax", lambda: flashtune.softmax(x)),
        ("flashtune.softmax (autograd)", lambda: flashtune.softmax(xg)),
        ("torch.ops.flashtune.softmax", lambda: torch.ops.flashtune.softmax(x, -1)),
        ("generated launch() (preallocated out)", lambda: module.launch(x, y)),
    ]
    cfg = picked.config
    if cfg["regime"] == "row":
        kernel = getattr(module, "_softmax_row")
        grid = (triton.cdiv(rows, cfg["rows_per_program"]),)
        sx, sy = x.stride(0), y.stride(0)
        blk, rpp, nw, ns = cfg["block"], cfg["rows_per_program"], cfg["num_warps"], cfg["num_stages"]
        cands.append(("bare Triton kernel[grid](...)", lambda: kernel[grid](
            x, y, rows, cols, sx, sy, BLOCK=blk, ROWS=rpp, num_warps=nw, num_stages=ns)))
    cands.append(("torch.empty_like (alloc only)", lambda: torch.empty_like(x)))

    iters = args.iters if not args.allow_cpu else min(args.iters, 20)
    results = []
    for i, (name, fn) in enumerate(cands, 1):
        host, wall = _time(fn, iters, args.repeats, sync)
        results.append({"name": name, "host_us": round(host, 3), "wall_us": round(wall, 3)})
        print(f"[{i}/{len(cands)}] {name:40s} host {host:8.2f} us   wall {wall:8.2f} us", flush=True)

    ours = next(r for r in results if r["name"] == "flashtune.softmax")
    bare = next((r for r in results if r["name"].startswith("bare")), None)
    verdict = "PASS" if ours["host_us"] <= BUDGET_US else "FAIL"
    summary = (f"flashtune.softmax cache hit: {ours['host_us']:.2f} us/call host "
               f"(budget {BUDGET_US} us: {verdict})")
    if bare:
        summary += f"; {ours['host_us'] - bare['host_us']:+.2f} us vs the bare Triton launch"
    print(summary)

    record = {
        "device": device_name, "shape": [rows, cols], "dtype": args.dtype,
        "iters": iters, "repeats": args.repeats, "python": platform.python_version(),
        "torch": torch.__version__, "triton": triton.__version__,
        "flashtune": flashtune.__version__, "choice": picked.how,
        "config": picked.config.as_dict(), "source": str(source_path("softmax", picked.config)),
        "budget_us": BUDGET_US, "verdict": verdict, "results": results,
    }
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "host_overhead.json").write_text(json.dumps(record, indent=2) + "\n")
    md = [f"# Host overhead per call ({device_name})", "",
          f"softmax {rows}x{cols} {args.dtype}, {iters} calls x {args.repeats} repeats (median); "
          f"torch {torch.__version__}, triton {triton.__version__}; dispatcher: {picked.how} config.",
          "", "| candidate | host us/call | wall us/call |", "|---|---:|---:|"]
    md += [f"| {r['name']} | {r['host_us']:.2f} | {r['wall_us']:.2f} |" for r in results]
    md += ["", summary, ""]
    (args.out / "host_overhead.md").write_text("\n".join(md))
    print(f"wrote {args.out / 'host_overhead.json'} and {args.out / 'host_overhead.md'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
