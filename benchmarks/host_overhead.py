"""Per-call host overhead of flashtune.softmax vs torch.softmax vs a bare Triton launch.

GPU script (one call on the GPU box):

    python benchmarks/host_overhead.py                 # writes benchmarks/results/host_overhead.{json,md}
    python benchmarks/host_overhead.py --out DIR --shape 4x128 --dtype float16 --iters 20000

The measuring code lives in flashtune.bench.overhead (shared with `flashtune bench`).

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

The budget: flashtune.softmax on a cache hit <= 10 us per call. flashtune.softmax launches its
kernels through the fast path (flashtune.dispatch.fast_launch) where Triton allows it; this script
adds the fast path's own candidates (fast_candidates below) and reports whether it was on:
- flashtune.softmax (fast launch off)    FLASHTUNE_FAST_LAUNCH=0: JITFunction.run on every call
- plan(x), fast / normal launch          the cached plan alone (alloc + launch), no op dispatch
- generated launch(), fast path          launch(x, y) with its kernels behind FastKernel stand-ins
- FastKernel kernel[grid](...)           the bare kernel call through a stand-in (row regime)

``--allow-cpu`` runs the same code on CPU tensors under TRITON_INTERPRET=1 (a smoke test of this
script: interpreter timings mean nothing).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
from pathlib import Path


def _parse_shape(text: str) -> tuple[int, int]:
    rows, cols = (int(p) for p in text.lower().split("x"))
    return rows, cols


def fast_candidates(x, config, module) -> list[tuple[str, object, object]]:
    """(name, wrapper or None, call) for the fast launch path; a wrapper runs the timing."""
    import torch

    import flashtune
    import flashtune.dispatch as dispatch
    from flashtune.bench.overhead import row_kernel_call
    from flashtune.dispatch import fast_launch
    from flashtune.dispatch.plans import forward_plan

    y = torch.empty_like(x)
    plan_fast = forward_plan(x, x.dim() - 1, "softmax", config, fast=True)
    plan_normal = forward_plan(x, x.dim() - 1, "softmax", config, fast=False)
    fast_launch_fn = fast_launch.accelerate(module.launch)

    def fast_off(timing):
        """Time with plans rebuilt under FLASHTUNE_FAST_LAUNCH=0, then restore."""
        saved = os.environ.get(fast_launch.ENV_SWITCH)
        os.environ[fast_launch.ENV_SWITCH] = "0"
        dispatch.reset()
        try:
            return timing()
        finally:
            if saved is None:
                os.environ.pop(fast_launch.ENV_SWITCH, None)
            else:
                os.environ[fast_launch.ENV_SWITCH] = saved
            dispatch.reset()

    out = [("flashtune.softmax (fast launch off)", fast_off, lambda: flashtune.softmax(x)),
           ("plan(x), fast launch", None, lambda: plan_fast(x)),
           ("plan(x), normal launch", None, lambda: plan_normal(x)),
           ("generated launch(), fast path", None, lambda: fast_launch_fn(x, y))]
    sup = fast_launch.support()
    kernel = getattr(module, "_softmax_row", None)
    if config["regime"] == "row" and sup is not None and type(kernel) is sup.jit_cls:
        stand_in = fast_launch.FastKernel(kernel, sup)
        grid, args, kwargs = row_kernel_call(module, config, x, y)
        out.append(("FastKernel kernel[grid](...)", None,
                    lambda: stand_in[grid](*args, **kwargs)))
    for name, _, fn in out:  # each must compute softmax before it is timed
        if name.startswith(("plan", "generated", "FastKernel")):
            y.zero_()
            got = fn()
            got = y if got is None or not isinstance(got, torch.Tensor) else got
            torch.testing.assert_close(got.float(), torch.softmax(x.float(), -1),
                                       atol=2e-3, rtol=2e-2, msg=name)
    return out


def fast_launch_report(x) -> dict:
    """Is the fast path on, and did flashtune.softmax's plan for ``x``'s layout take it?"""
    import flashtune.dispatch as dispatch
    from flashtune.dispatch import fast_launch

    plans = dispatch.RUNTIME.plans["softmax"]  # keyed as flashtune.dispatch.runtime keys them
    base = (x.shape, x.stride(), x.dtype, x.device)
    plan = plans.get(base + (-1,)) or plans.get(base + (x.dim() - 1,))
    kernels = getattr(getattr(plan, "launch", None), "fast_kernels", ())
    return {"status": fast_launch.status(),
            "public_op_fast_calls": sum(k.fast_calls for k in kernels),
            "public_op_normal_calls": sum(k.normal_calls for k in kernels)}


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

    from flashtune.bench.overhead import measure_overhead, overhead_markdown, time_calls
    from flashtune.dispatch import choice
    from flashtune.gen import load_variant

    if torch.cuda.is_available() and not args.allow_cpu:
        device = "cuda"
    elif args.allow_cpu:
        device = "cpu"
    else:
        print("host_overhead.py needs a CUDA GPU (or --allow-cpu for a smoke test)", file=sys.stderr)
        return 2

    iters = args.iters if not args.allow_cpu else min(args.iters, 20)
    record = measure_overhead(device, args.shape, args.dtype, iters, args.repeats,
                              log=lambda line: print(line, flush=True))
    rows, cols = args.shape
    x = torch.randn(rows, cols, device=device, dtype=getattr(torch, args.dtype))
    fast = fast_launch_report(x)  # before the candidates below reset the dispatcher's plans
    # The fast path's own candidates, on the same shape, dtype and dispatcher choice.
    config = choice("softmax", (rows, cols), args.dtype, device).config
    extra = fast_candidates(x, config, load_variant("softmax", config))
    sync = torch.cuda.synchronize if device == "cuda" else (lambda: None)
    for i, (name, wrap, fn) in enumerate(extra, 1):
        timing = (lambda fn=fn: time_calls(fn, iters, args.repeats, sync))
        host, wall = wrap(timing) if wrap else timing()
        record["results"].append({"name": name, "host_us": round(host, 3), "wall_us": round(wall, 3)})
        print(f"[+{i}/{len(extra)}] {name:40s} host {host:8.2f} us   wall {wall:8.2f} us", flush=True)
    record["fast_launch"] = fast
    fast_line = (f"fast launch: {fast['status']}; flashtune.softmax's plan: "
                 f"{fast['public_op_fast_calls']} fast / {fast['public_op_normal_calls']} normal "
                 "launches")
    print(record["summary"])
    print(fast_line)
    record["python"] = platform.python_version()
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "host_overhead.json").write_text(json.dumps(record, indent=2) + "\n")
    md = [f"# Host overhead per call ({record['device']})", "",
          f"torch {record['torch']}, triton {record['triton']}.", "", *overhead_markdown(record),
          "", fast_line, ""]
    (args.out / "host_overhead.md").write_text("\n".join(md))
    print(f"wrote {args.out / 'host_overhead.json'} and {args.out / 'host_overhead.md'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
