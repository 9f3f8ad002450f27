"""The full softmax variant matrix on a GPU: semantics x dtypes, plus warps, stages, L2 hints.

Run with ``pytest -m gpu``. Interpreter runs ignore warps and stages, so only this file checks
that every launch configuration computes the same function.
"""

from __future__ import annotations

import zlib

import pytest
import torch

from flashtune.gen.softmax_space import OPS, REGIMES, SoftmaxProblem, problem_misfit

from softmax_cases import BACKWARD_OPS, DTYPES, FORWARD_OPS, make_config, run_case

pytestmark = pytest.mark.gpu

ROW_SHAPES = ((33, 1000), (7, 4000), (3000, 100))
LOOP_SHAPES = ((33, 1000), (5, 12345), (2, 70001))


def _semantic(op, regime):
    fwd = OPS[op].direction == "fwd"
    forms = [{"exp2": True}, {"exp2": False}] if fwd else [{}]
    if regime == "row":
        shapes = [{"rows_per_program": r} for r in (1, 4)]
    elif regime == "online":
        shapes = [{"block": b, "lane_stats": ls} for b in (256, 4096) for ls in (False, True)]
        if fwd:
            shapes += [{"block": 1024, "max_pass": True}, {"block": 1024, "resident": 4096},
                       {"block": 1024, "resident": 4096, "lane_stats": True},
                       {"block": 1024, "resident": 8192, "max_pass": True}]
    else:
        shapes = [{"block": b, "splits": s, "lane_stats": ls}
                  for b in (256, 4096) for s in (2, 16) for ls in (False, True)]
        if fwd:
            shapes.append({"block": 1024, "splits": 4, "max_pass": True})
    return [dict(s, **f) for s in shapes for f in forms]


def _launch_sweep(regime):
    """num_warps sweep at 2 stages, num_stages sweep at 8 warps, both L2 hints."""
    if regime == "row":
        return [{"num_warps": w, "num_stages": 1} for w in (1, 2, 4, 8, 16, 32)]
    sweep = [{"num_warps": w, "num_stages": 2, "l2_hint": True} for w in (1, 2, 4, 8, 16, 32)]
    sweep += [{"num_warps": 8, "num_stages": s, "l2_hint": True} for s in (1, 3, 4)]
    sweep.append({"num_warps": 8, "num_stages": 2, "l2_hint": False})
    return sweep


def _cases():
    for op in FORWARD_OPS + BACKWARD_OPS:
        for regime in REGIMES:
            for dtype in DTYPES:
                for knobs in _semantic(op, regime):
                    launch = {"num_warps": 4, "num_stages": 1 if regime == "row" else 2,
                              "l2_hint": regime != "row"}
                    yield op, regime, dict(knobs, **launch), dtype
            # the widest tile of the regime, so every warp count has work
            base = next(k for k in _semantic(op, regime) if k.get("block", 4096) == 4096)
            for launch in _launch_sweep(regime):
                yield op, regime, dict(base, **launch), torch.float16


CASES = [pytest.param(*c, id=f"{c[0]}-{c[1]}-" + "-".join(f"{k}={v}" for k, v in c[2].items())
                      + f"-{str(c[3])[6:]}") for c in _cases()]


@pytest.mark.parametrize("op,regime,knobs,dtype", CASES)
def test_gpu_variant(op, regime, knobs, dtype, record_variant):
    gen = torch.Generator().manual_seed(zlib.crc32(f"{op}{regime}{knobs}{dtype}".encode()))
    ran = 0
    for rows, cols in ROW_SHAPES if regime == "row" else LOOP_SHAPES:
        raw = make_config(op, regime, knobs, cols)
        if regime == "row" and raw["num_warps"] > 1:
            # at least 32 elements per warp in the tile
            raw["num_warps"] = min(raw["num_warps"], max(1, raw["block"] * raw["rows_per_program"] // 32))
        config = OPS[op].space.validate(raw)
        if problem_misfit(config, SoftmaxProblem(rows, cols, str(dtype)[6:])):
            continue
        x = (torch.randn(rows, cols, generator=gen) * 3).to(device="cuda", dtype=dtype)
        acc = run_case(op, x, config)
        torch.cuda.synchronize()
        assert acc.ok, f"{config} on {rows}x{cols}: {acc}"
        record_variant(op, dtype, config)
        ran += 1
    assert ran >= 1
