"""Rows of odd width that the shape sweep found slower than torch (H100, this session).

Part A, the row regime's GRAIN (strides and row length in units of the largest power-of-two
vector they share): each default row config timed with its computed grain and with grain 1
(the kernels before this change), forward and backward, next to torch; then a small sweep of
rows per program x warps on two shapes.
Part B, few rows of odd width (split regime by default, element-wise loads): the default
against online-regime configs with the aligned walk, next to torch.

do_bench medians (L2 flushed), 25 ms warm-up, 100 ms of repetitions."""
import itertools
import sys

import torch

from flashtune.dispatch.plans import aten_backward
from flashtune.gen import load_variant
from flashtune.gen.softmax_space import OPS, SoftmaxProblem, default_config
from flashtune.tuner.timing import bench_gpu

DT = {"float16": torch.float16, "bfloat16": torch.bfloat16, "float32": torch.float32}


def t(fn):
    return bench_gpu(fn, 25, 100)[0] * 1e3


def fwd_case(op, cfg, x, grain_one=False):
    mod = load_variant(op, OPS[op].space.validate(cfg))
    launch = mod.launch
    if grain_one:
        mod_globals = launch.__globals__
        saved = mod_globals["row_grain"]
        mod_globals["row_grain"] = lambda *a: 1
    y = torch.empty_like(x)
    try:
        launch(x, y)
        torch.cuda.synchronize()
        ref = torch.softmax(x.double(), -1)
        err = (y.double() - ref).abs().max().item()
        ms = t(lambda: launch(x, y))
    finally:
        if grain_one:
            mod_globals["row_grain"] = saved
    return ms, err


def bwd_case(op, cfg, y, dy, grain_one=False):
    mod = load_variant(op, OPS[op].space.validate(cfg))
    launch = mod.launch
    if grain_one:
        g = launch.__globals__
        saved = g["row_grain"]
        g["row_grain"] = lambda *a: 1
    dx = torch.empty_like(y)
    try:
        launch(y, dy, dx)
        torch.cuda.synchronize()
        yd, dyd = y.double(), dy.double()
        ref = yd * (dyd - (yd * dyd).sum(-1, keepdim=True))
        err = (dx.double() - ref).abs().max().item()
        ms = t(lambda: launch(y, dy, dx))
    finally:
        if grain_one:
            g["row_grain"] = saved
    return ms, err


def part_a():
    print("== A: row regime, grain vs grain 1 (us; err vs float64)", flush=True)
    shapes = [(200000, 100), (200000, 127), (50000, 100), (200000, 120), (200000, 36),
              (100000, 500), (20000, 3000)]
    for (r, c), dname in itertools.product(shapes, DT):
        dt = DT[dname]
        x = torch.randn(r, c, device="cuda").to(dt)
        fcfg = default_config("softmax", SoftmaxProblem(r, c, dname)).as_dict()
        t_torch = t(lambda: torch.softmax(x, -1))
        g_ms, g_err = fwd_case("softmax", fcfg, x)
        o_ms, o_err = fwd_case("softmax", fcfg, x, grain_one=True)
        y = torch.softmax(x, -1)
        dy = torch.randn_like(y)
        bcfg = default_config("softmax_backward", SoftmaxProblem(r, c, dname)).as_dict()
        back = aten_backward(False)
        tb_torch = t(lambda: back(dy, y, -1, dt))
        bg_ms, bg_err = bwd_case("softmax_backward", bcfg, y, dy)
        bo_ms, bo_err = bwd_case("softmax_backward", bcfg, y, dy, grain_one=True)
        print(f"{r}x{c} {dname:8s} fwd torch {t_torch:7.1f} grain {g_ms:7.1f} (x{t_torch/g_ms:.2f}) "
              f"grain1 {o_ms:7.1f} (x{t_torch/o_ms:.2f}) err {g_err:.1e}/{o_err:.1e} | bwd torch "
              f"{tb_torch:7.1f} grain {bg_ms:7.1f} (x{tb_torch/bg_ms:.2f}) grain1 {bo_ms:7.1f} "
              f"(x{tb_torch/bo_ms:.2f}) err {bg_err:.1e}/{bo_err:.1e}  cfg b{fcfg['block']} "
              f"r{fcfg['rows_per_program']} w{fcfg['num_warps']}", flush=True)
    print("== A2: row configs on odd narrow rows, fp16 forward (us)", flush=True)
    for r, c in [(200000, 100), (200000, 127)]:
        x = torch.randn(r, c, device="cuda").to(torch.float16)
        base = default_config("softmax", SoftmaxProblem(r, c, "float16")).as_dict()
        line = [f"{r}x{c} torch {t(lambda: torch.softmax(x, -1)):.1f}"]
        for rows, warps in itertools.product((4, 8, 16, 32, 64), (1, 2, 4, 8)):
            if 128 * rows < 32 * warps:
                continue
            ms, err = fwd_case("softmax", dict(base, rows_per_program=rows, num_warps=warps), x)
            line.append(f"r{rows}w{warps} {ms:.1f}")
        print(" | ".join(line), flush=True)


def part_b():
    print("== B: few rows of odd width, forward (us)", flush=True)
    for (r, c), dname in itertools.product([(100, 65537), (33, 65537), (64, 100003), (100, 40001),
                                            (16, 2000001)], ("float16", "float32")):
        dt = DT[dname]
        x = torch.randn(r, c, device="cuda").to(dt)
        prob = SoftmaxProblem(r, c, dname)
        base = default_config("softmax", prob).as_dict()
        line = [f"{r}x{c} {dname} torch {t(lambda: torch.softmax(x, -1)):.1f}"]
        ms, err = fwd_case("softmax", base, x)
        line.append(f"default({base['regime']} s{base['splits']}) {ms:.1f}")
        online = dict(base, regime="online", splits=1, fused=False, programs_per_sm=0, align=True,
                      l2_hint=True, num_stages=1, lane_stats=False, vector_stats=True)
        for block, warps in itertools.product((4096, 8192, 16384), (8, 16, 32)):
            cfg = dict(online, block=block, num_warps=warps)
            ms, err = fwd_case("softmax", cfg, x)
            line.append(f"online b{block} w{warps} {ms:.1f}{'' if err < 1e-2 else ' WRONG'}")
        print(" | ".join(line), flush=True)


if __name__ == "__main__":
    print(torch.cuda.get_device_name(), torch.__version__, flush=True)
    parts = sys.argv[1:] or ["a", "b"]
    if "a" in parts:
        part_a()
    if "b" in parts:
        part_b()
