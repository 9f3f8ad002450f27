"""Per-call host overhead: flashtune.softmax vs torch.softmax vs a bare Triton launch.

Method: a small tensor, so the GPU finishes each kernel faster than the host issues the next;
each candidate is called ``iters`` times in a loop with a device sync only before and after.
"host us" is the CPU time per call until the loop returns (the launch cost the Python caller
sees); "wall us" includes draining the GPU queue. Median of ``repeats`` loops. All candidates
run the same kernel variant: the one the dispatcher picks for the shape.

Used by ``flashtune bench`` and by benchmarks/host_overhead.py.
"""

from __future__ import annotations

import statistics
import time
from typing import Callable

BUDGET_US = 10.0  # flashtune.softmax on a cache hit, per call


def time_calls(fn: Callable[[], object], iters: int, repeats: int,
               sync: Callable[[], None]) -> tuple[float, float]:
    """(host us, wall us) per call: medians over ``repeats`` loops of ``iters`` calls."""
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


def candidates(x, config, module) -> list[tuple[str, Callable[[], object]]]:
    """(name, call) pairs on input ``x``; ``module`` is the loaded variant of ``config``."""
    import torch

    import flashtune

    xg = x.clone().requires_grad_()
    y = torch.empty_like(x)
    out = [
        ("torch.softmax", lambda: torch.softmax(x, -1)),
        ("flashtune.softmax", lambda: flashtune.softmax(x)),
        ("flashtune.softmax (autograd)", lambda: flashtune.softmax(xg)),
        ("torch.ops.flashtune.softmax", lambda: torch.ops.flashtune.softmax(x, -1)),
        ("generated launch() (preallocated out)", lambda: module.launch(x, y)),
    ]
    if config["regime"] == "row":
        kernel = getattr(module, "_softmax_row")
        grid, args, kwargs = row_kernel_call(module, config, x, y)
        from ..gen.loader import interpreter_mode, run_interpreted

        def bare():
            return kernel[grid](*args, **kwargs)

        if interpreter_mode():  # launched as the variant's launch() is (no numpy warnings)
            out.append(("bare Triton kernel[grid](...)", lambda: run_interpreted(bare)))
        else:
            out.append(("bare Triton kernel[grid](...)", bare))
    out.append(("torch.empty_like (alloc only)", lambda: torch.empty_like(x)))
    return out


def row_kernel_call(module, config, x, y) -> tuple[tuple, tuple, dict]:
    """(grid, args, kwargs) of a bare launch of the row variant ``module``'s kernel on (x, y),
    as its launch() builds them: row length and strides in grains (``_row_grain``)."""
    import triton

    rows, cols = x.shape
    grain = module._row_grain(16 // x.element_size(), cols, x.stride(0), y.stride(0))
    grid = (triton.cdiv(rows, config["rows_per_program"]),)
    args = (x, y, rows, cols // grain, x.stride(0) // grain, y.stride(0) // grain)
    kwargs = dict(BLOCK=config["block"], ROWS=config["rows_per_program"], GRAIN=grain,
                  num_warps=config["num_warps"], num_stages=config["num_stages"],
                  enable_fp_fusion=True)  # as the template launches it
    return grid, args, kwargs


def measure_overhead(device: str, shape: tuple[int, int] = (4, 128), dtype: str = "float16",
                     iters: int = 20000, repeats: int = 7,
                     log: Callable[[str], None] = lambda line: None) -> dict:
    """The overhead record (JSON-ready): every candidate's host and wall us per call."""
    import torch
    import triton

    import flashtune
    from ..dispatch import RUNTIME, choice
    from ..gen import load_variant, source_path

    on_gpu = torch.device(device).type == "cuda"
    sync = torch.cuda.synchronize if on_gpu else (lambda: None)
    device_name = torch.cuda.get_device_name() if on_gpu else "cpu (Triton interpreter)"
    rows, cols = shape
    x = torch.randn(rows, cols, device=device, dtype=getattr(torch, dtype))
    picked = choice("softmax", (rows, cols), dtype, device)
    module = load_variant("softmax", picked.config)
    # FLASHTUNE_DISABLE=1: flashtune.softmax (and the op) call torch.softmax, whatever the
    # dispatcher would pick; only the launch rows below run the picked config's kernel.
    disabled = RUNTIME.disabled
    how = "torch (FLASHTUNE_DISABLE=1)" if disabled else picked.how
    ran = f"{how}; the launch rows run the {picked.how} config" if disabled else f"{how} config"
    log(f"{device_name}: softmax {rows}x{cols} {dtype}: {ran} {picked.config.as_dict()}")
    torch.testing.assert_close(flashtune.softmax(x).float(), torch.softmax(x.float(), -1),
                               atol=2e-3, rtol=2e-2)
    cands = candidates(x, picked.config, module)
    results = []
    for i, (name, fn) in enumerate(cands, 1):
        host, wall = time_calls(fn, iters, repeats, sync)
        results.append({"name": name, "host_us": round(host, 3), "wall_us": round(wall, 3)})
        log(f"[{i}/{len(cands)}] {name:40s} host {host:8.2f} us   wall {wall:8.2f} us")
    ours = next(r for r in results if r["name"] == "flashtune.softmax")
    bare = next((r for r in results if r["name"].startswith("bare")), None)
    if disabled:  # torch.softmax's cost behind one flag check: no cache hit was measured
        verdict = "n/a (FLASHTUNE_DISABLE=1: torch.softmax ran)"
    elif on_gpu:
        verdict = "PASS" if ours["host_us"] <= BUDGET_US else "FAIL"
    else:
        verdict = "n/a (interpreter timings)"
    what = "flashtune.softmax running torch.softmax" if disabled else "flashtune.softmax cache hit"
    summary = f"{what}: {ours['host_us']:.2f} us/call host (budget {BUDGET_US} us: {verdict})"
    if bare:
        summary += f"; {ours['host_us'] - bare['host_us']:+.2f} us vs the bare Triton launch"
    return {"device": device_name, "shape": [rows, cols], "dtype": dtype, "iters": iters,
            "repeats": repeats, "torch": torch.__version__, "triton": triton.__version__,
            "flashtune": flashtune.__version__, "choice": how, "disabled": disabled,
            "config": picked.config.as_dict(), "source": str(source_path("softmax", picked.config)),
            "budget_us": BUDGET_US, "verdict": verdict, "summary": summary, "results": results}


def overhead_markdown(record: dict) -> list[str]:
    rows, cols = record["shape"]
    dispatcher = (f"{record['choice']}: flashtune.softmax ran torch.softmax, the launch rows "
                  "a flashtune kernel" if record.get("disabled") else f"{record['choice']} config")
    lines = [f"softmax {rows}x{cols} {record['dtype']}, {record['iters']} calls x "
             f"{record['repeats']} repeats (median); dispatcher: {dispatcher}.",
             "", "| candidate | host us/call | wall us/call |", "|---|---:|---:|"]
    lines += [f"| {r['name']} | {r['host_us']:.2f} | {r['wall_us']:.2f} |" for r in record["results"]]
    return lines + ["", record["summary"]]
