"""Softmax on the GPU: the best flashtune variant per shape next to torch, in one run.

For each shape of the benchmark set (../shared/benchmarks.md) and dtype, a small search over
candidate configs (each checked against float64 first) picks flashtune's best; it is timed
next to torch.softmax, torch.compile(torch.softmax) and the plain two-pass online kernel with
BLOCK 1024 (one program per row). Times: triton.testing.do_bench medians (L2 flushed between
repetitions). GB/s = 2 * bytes(x) / time; copy bandwidth from a 1 GiB device-to-device copy.

Until the tuner lands, the search here is a fixed candidate list: fp16 searches all candidates,
bf16 and fp32 re-time fp16's best three plus their own heuristic default.

Usage: python benchmarks/bench_softmax.py [--out DIR] [--shapes 4096x50257,...] [--dtypes ...]
       [--regimes coop,...]
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import sys
import time
from pathlib import Path

import torch
import triton
import triton.testing

from flashtune.gen import ConfigError, load_variant
from flashtune.gen.softmax_ops import softmax_forward
from flashtune.gen.softmax_space import OPS, SoftmaxProblem, default_config, problem_misfit
from flashtune.bench.peers import online_1024_config
from flashtune.bench.shapes import SOFTMAX_SHAPES as SHAPES
from flashtune.reference import check_accuracy, softmax_ref

DTYPES = {"float16": torch.float16, "bfloat16": torch.bfloat16, "float32": torch.float32}
ONLINE_1024 = online_1024_config()  # shared with `flashtune bench` (flashtune.bench.peers)


def next_pow2(n: int) -> int:
    return 1 if n <= 1 else 1 << (n - 1).bit_length()


def candidates(rows: int, cols: int, sm_count: int) -> list[dict]:
    """A hand-picked search list across the three regimes (deduplicated, all validated)."""
    base = {"rows_per_program": 1, "splits": 1, "num_stages": 1, "lane_stats": False,
            "l2_hint": False, "exp2": True, "max_pass": False, "resident": 0,
            "align": False, "fused": False, "programs_per_sm": 0, "paired_loads": False,
            "vector_stats": False}
    out: list[dict] = []
    block = next_pow2(cols)  # the row regime's tile: the row's width (below 16 too)
    if block <= 65536:
        for rpp in (1, 2, 4, 8, 16, 32, 64, 128, 512):
            tile = block * rpp
            if tile > 65536 or (rpp > 1 and tile > 16384):
                continue
            for per_thread in (8, 16, 32, 64):
                warps = tile // (32 * per_thread)
                if 1 <= warps <= 32:
                    out.append(dict(base, regime="row", block=block, rows_per_program=rpp,
                                    num_warps=warps))
    loop = [(4096, 8, 2, False, True), (4096, 16, 2, True, True), (8192, 16, 2, False, True),
            (2048, 8, 3, False, True), (4096, 8, 2, False, False), (8192, 32, 2, True, True),
            (16384, 32, 2, False, True), (2048, 4, 2, True, True), (1024, 4, 3, True, True),
            (4096, 16, 3, False, True)]
    if cols > 4096:
        for blk, warps, stages, lane, hint in loop:
            for max_pass in (False, True) if not lane else (False,):
                out.append(dict(base, regime="online", block=blk, num_warps=warps,
                                num_stages=stages, lane_stats=lane, l2_hint=hint,
                                max_pass=max_pass))
        splits = 2
        while splits <= 256:
            programs = rows * splits
            if sm_count <= programs <= 32 * sm_count and cols // splits >= 1024:
                for blk, warps, stages, lane, hint in loop[:4] + loop[7:]:
                    if cols // splits >= blk:
                        for max_pass in (False, True) if not lane else (False,):
                            out.append(dict(base, regime="split", block=blk, splits=splits,
                                            num_warps=warps, num_stages=stages, lane_stats=lane,
                                            l2_hint=hint, max_pass=max_pass))
            splits *= 2
        # fused split: statistics, row barrier and output in one launch (splits <= SMs / 4)
        for splits in (4, 8, 16, 32):
            if splits <= sm_count // 4 and rows * splits <= 32 * sm_count:
                for blk, warps in ((2048, 8), (4096, 8), (4096, 16), (8192, 8), (8192, 16)):
                    if cols // splits >= blk:
                        out.append(dict(base, regime="split", block=blk, splits=splits,
                                        num_warps=warps, num_stages=1, lane_stats=True,
                                        l2_hint=True, fused=True))
    if cols > 4096:
        # coop: the row over `splits` programs in one launch, each segment held in registers.
        splits = 2
        while splits <= min(128, sm_count):
            seg = -(-cols // splits)
            blk = max(16, next_pow2(seg))
            if 1024 <= blk <= 32768 and rows * splits <= 64 * sm_count * 8:
                for per_thread in (8, 16, 32, 64):
                    warps = blk // (32 * per_thread)
                    if 1 <= warps <= 32:
                        out.append(dict(base, regime="coop", block=blk, splits=splits,
                                        num_warps=warps))
            splits *= 2
    if cols > 32768 and rows >= sm_count:
        # Wide rows with many rows: sweep the online regime more finely.
        for blk in (1024, 2048, 4096, 8192, 16384):
            for warps in (4, 8, 16, 32):
                if not 2 <= blk // (32 * warps) <= 16:
                    continue
                for lane, max_pass in ((False, False), (True, False), (False, True)):
                    for hint in (False, True):
                        out.append(dict(base, regime="online", block=blk, num_warps=warps,
                                        num_stages=2, lane_stats=lane, l2_hint=hint,
                                        max_pass=max_pass))
                    if warps >= 16 and blk in (4096, 8192):
                        for resident in (16384, 32768):  # part of the row held in registers
                            for lane, max_pass in ((False, False), (True, False), (False, True)):
                                out.append(dict(base, regime="online", block=blk,
                                                num_warps=warps, num_stages=2, lane_stats=lane,
                                                l2_hint=False, max_pass=max_pass,
                                                resident=resident))
                    if warps == 32:  # the best family on 4096x50257: vary pipelining depth too
                        for stages in (1, 3, 4):
                            out.append(dict(base, regime="online", block=blk, num_warps=warps,
                                            num_stages=stages, lane_stats=lane, l2_hint=False,
                                            max_pass=max_pass))
    if cols % 8:  # fp16 rows start off 16-byte boundaries: add the aligned walk
        out += [dict(c, align=True) for c in out if c["regime"] == "online" and not c["resident"]]
    space = OPS["softmax"].space
    valid = []
    for raw in out:
        try:
            config = space.validate(raw)
        except ConfigError:
            continue
        if problem_misfit(config, SoftmaxProblem(rows, cols, "float16")) is None and config not in valid:
            valid.append(config)
    return valid


def bench(fn, quantiles=(0.5, 0.2, 0.8)):
    med, p20, p80 = triton.testing.do_bench(fn, warmup=25, rep=100, quantiles=list(quantiles))
    return med, p20, p80


def copy_ms(nbytes: int) -> float:
    """Median time of a device-to-device copy of ``nbytes`` (same method as the kernels)."""
    src = torch.empty(nbytes, dtype=torch.uint8, device="cuda").random_()
    dst = torch.empty_like(src)
    ms = bench(lambda: dst.copy_(src))[0]
    del src, dst
    return ms


def copy_bandwidth() -> float:
    n = 1 << 30
    src = torch.empty(n, dtype=torch.uint8, device="cuda").random_()
    dst = torch.empty_like(src)
    ms, _, _ = bench(lambda: dst.copy_(src))
    del src, dst
    return 2 * n / (ms * 1e-3) / 1e9


def run_shape(rows, cols, dtype_name, configs, results_log, all_timings):
    """Check then time each candidate's kernel launch (output preallocated, no Python wrapper)."""
    dtype = DTYPES[dtype_name]
    x = torch.randn(rows, cols, device="cuda", dtype=dtype)
    ref = softmax_ref(x, -1).to(torch.float64)
    peer_out = torch.softmax(x, -1)
    y = torch.empty_like(x)
    timed = []
    for config in configs:
        try:
            out = softmax_forward(x, -1, config=config)
            acc = check_accuracy(out, ref, peer_out)
            if not acc.ok:
                results_log.append({"shape": [rows, cols], "dtype": dtype_name,
                                    "config": dict(config), "error": str(acc)})
                continue
            launch = load_variant("softmax", config).launch
            med, p20, p80 = bench(lambda: launch(x, y))
            all_timings.append({"shape": [rows, cols], "dtype": dtype_name,
                                "config": dict(config), "median_ms": med})
        except Exception as err:  # a compile error or OutOfResources is a failed candidate
            results_log.append({"shape": [rows, cols], "dtype": dtype_name,
                                "config": dict(config), "error": f"{type(err).__name__}: {err}"[:300]})
            continue
        timed.append((med, p20, p80, config))
    timed.sort(key=lambda t: t[0])
    return x, timed


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=os.environ.get("OUT", "benchmarks/results"))
    parser.add_argument("--shapes", default=",".join(f"{r}x{c}" for r, c in SHAPES))
    parser.add_argument("--dtypes", default="float16,bfloat16,float32")
    parser.add_argument("--no-compile-peer", action="store_true")
    parser.add_argument("--regimes", default="row,online,split,coop",
                        help="comma list: search only candidates of these regimes")
    parser.add_argument("--budget", type=float, default=1e9,
                        help="seconds of search; past it, remaining shapes time only the default "
                             "and the first dtype's best three")
    args = parser.parse_args()
    shapes = [tuple(int(v) for v in s.split("x")) for s in args.shapes.split(",")]
    dtypes = args.dtypes.split(",")
    props = torch.cuda.get_device_properties(0)
    sm_count = props.multi_processor_count
    started = time.time()
    copy_gbs = copy_bandwidth()
    print(f"device {props.name}, {sm_count} SMs, copy bandwidth {copy_gbs:.0f} GB/s", flush=True)
    compiled_softmax = None if args.no_compile_peer else torch.compile(
        lambda t: torch.softmax(t, -1), dynamic=False)
    rows_out, failures, all_timings = [], [], []
    best_fp16: dict = {}
    for rows, cols in shapes:
        for dtype_name in dtypes:
            problem = SoftmaxProblem(rows, cols, dtype_name)
            default = default_config("softmax", problem, sm_count)
            if dtype_name == dtypes[0] and time.time() - started < args.budget:
                regimes = set(args.regimes.split(","))
                configs = [c for c in candidates(rows, cols, sm_count) if c["regime"] in regimes]
            else:
                configs = list(best_fp16.get((rows, cols), []))
            if default not in configs:
                configs.append(default)
            t0 = time.time()
            x, timed = run_shape(rows, cols, dtype_name, configs, failures, all_timings)
            if dtype_name == dtypes[0]:
                best_fp16[(rows, cols)] = [t[3] for t in timed[:3]]
            nbytes = 2 * x.numel() * x.element_size()
            gbs = lambda ms: nbytes / (ms * 1e-3) / 1e9  # noqa: E731
            torch_ms = bench(lambda: torch.softmax(x, -1))[0]
            peers = {"torch.softmax": torch_ms}
            if compiled_softmax is not None:
                try:
                    compiled_softmax(x)
                    peers["torch.compile"] = bench(lambda: compiled_softmax(x))[0]
                except Exception as err:  # noqa: BLE001 - a peer failing is reported, not fatal
                    print(f"  torch.compile peer failed: {err}"[:200])
            try:
                peers["online-1024"] = bench(lambda: softmax_forward(x, -1, config=ONLINE_1024))[0]
            except Exception as err:  # noqa: BLE001
                print(f"  online-1024 peer failed: {err}"[:200])
            default_ms = next((t[0] for t in timed if t[3] == default), None)
            if not timed:
                print(f"{rows}x{cols} {dtype_name}: no candidate passed", flush=True)
                continue
            med, p20, p80, best = timed[0]
            # The same kernel through the Python entry (checks, reshape, output allocation).
            api_ms = bench(lambda: softmax_forward(x, -1, config=best))[0]
            same_copy_ms = copy_ms(x.numel() * x.element_size())
            row = {"rows": rows, "cols": cols, "same_size_copy_ms": same_copy_ms,
                   "frac_same_size_copy": same_copy_ms / med, "dtype": dtype_name, "mib": x.numel() * x.element_size() / 2**20,
                   "best_config": dict(best), "best_ms": med, "best_p20_ms": p20, "best_p80_ms": p80,
                   "best_gbs": gbs(med), "best_frac_copy": gbs(med) / copy_gbs,
                   "default_ms": default_ms, "api_ms": api_ms, "candidates": len(configs), "passed": len(timed),
                   "peers_ms": peers, "peers_gbs": {k: gbs(v) for k, v in peers.items()},
                   "speedup_vs_torch": torch_ms / med, "search_s": time.time() - t0}
            rows_out.append(row)
            print(f"{rows}x{cols} {dtype_name}: best {med*1e3:.1f} us {gbs(med):.0f} GB/s "
                  f"({100*gbs(med)/copy_gbs:.0f}% copy) torch {torch_ms*1e3:.1f} us "
                  f"x{torch_ms/med:.2f} [{best['regime']} b{best['block']} r{best['rows_per_program']} "
                  f"s{best['splits']} w{best['num_warps']} st{best['num_stages']}]", flush=True)
            del x
            torch.cuda.empty_cache()
    meta = {"device": props.name, "sm_count": sm_count, "date": dt.datetime.now(dt.timezone.utc).isoformat(),
            "torch": torch.__version__, "triton": triton.__version__, "python": platform.python_version(),
            "copy_gbs": copy_gbs, "wall_s": time.time() - started}
    out_dir = Path(args.out)
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "softmax_bench.json").write_text(json.dumps({"meta": meta, "rows": rows_out,
                                                           "failures": failures, "all_timings": all_timings}, indent=1))
    lines = [f"# Softmax forward: best flashtune variant vs peers",
             f"{meta['device']} ({sm_count} SMs), {meta['date'][:10]}, torch {meta['torch']}, "
             f"triton {meta['triton']}; copy bandwidth {copy_gbs:.0f} GB/s (1 GiB D2D copy). "
             "GB/s = 2 * bytes(x) / median time. flashtune us: the kernel launch with a preallocated "
             "output; api us: the same kernel through the Python entry.", "",
             "% copy: of the 1 GiB copy's bandwidth; % same-size copy: time of a copy of x's bytes "
             "(same do_bench method, L2 flushed) over our time.", "",
             "| shape | dtype | MiB | flashtune us | GB/s | % copy | % same-size copy | api us | torch us | x torch | compile us | online-1024 us | best config |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows_out:
        b = r["best_config"]
        cfg = (f"{b['regime']} block={b['block']} rpp={b['rows_per_program']} splits={b['splits']} "
               f"w={b['num_warps']} st={b['num_stages']} lane={int(b['lane_stats'])} "
               f"maxpass={int(b['max_pass'])} l2={int(b['l2_hint'])}")
        p = r["peers_ms"]
        fmt = lambda k: f"{p[k]*1e3:.1f}" if k in p else "-"  # noqa: E731
        lines.append(f"| {r['rows']}x{r['cols']} | {r['dtype']} | {r['mib']:.0f} | {r['best_ms']*1e3:.1f} | "
                     f"{r['best_gbs']:.0f} | {100*r['best_frac_copy']:.0f}% | {100*r['frac_same_size_copy']:.0f}% | "
                     f"{r['api_ms']*1e3:.1f} | {fmt('torch.softmax')} | "
                     f"{r['speedup_vs_torch']:.2f} | {fmt('torch.compile')} | {fmt('online-1024')} | {cfg} |")
    (out_dir / "softmax_bench.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    print(f"failed candidates: {len(failures)}; wall {meta['wall_s']:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
