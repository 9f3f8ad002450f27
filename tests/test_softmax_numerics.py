"""Numerical edge cases: huge logits, -inf entries, all -inf rows, NaN, chunk order."""

from __future__ import annotations

import pytest
import torch

from flashtune.gen.softmax_ops import softmax_backward, softmax_forward
from flashtune.gen.softmax_space import OPS, REGIMES

from softmax_cases import coop_block, forward_case, make_config, run_case, semantic_knobs

FORWARD = ("softmax", "log_softmax")


def _configs(op, n_cols):
    """One config per regime and per loop-statistics form, for this width."""
    for regime in REGIMES:
        for knobs in semantic_knobs(op, regime):
            if knobs.get("block") == 64 or regime == "row":
                if knobs.get("rows_per_program", 1) == 1 and knobs.get("splits", 8) == 8:
                    raw = make_config(op, regime, knobs, n_cols)
                    if regime == "coop":  # the smallest tile that holds one of 8 segments
                        raw["block"] = coop_block(n_cols, 8)
                    yield OPS[op].space.validate(raw)


def _torch(op, x):
    return (torch.log_softmax if OPS[op].log else torch.softmax)(x, -1)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("op", FORWARD)
def test_huge_logits_no_nan(op, dtype, device):
    x = (torch.randn(6, 300) * 1000).to(device=device, dtype=dtype)
    for config in _configs(op, 300):
        out = softmax_forward(x, -1, log=OPS[op].log, config=config)
        assert not torch.isnan(out).any(), config
        acc = forward_case(op, x, out)
        assert acc.ok, f"{config}: {acc}"


@pytest.mark.parametrize("op", FORWARD)
def test_large_offset_fp32_logits_keep_torch_accuracy(op, device):
    """fp32 logits around 1e6 (ulp 0.06): log_softmax must subtract the max before adding
    log(d), or log(d) rounds away (it wrote x - (m + log d): errors up to 0.03)."""
    x = (torch.randn(6, 300, generator=torch.Generator().manual_seed(3)) * 3 + 1e6).to(device)
    for config in _configs(op, 300):
        out = softmax_forward(x, -1, log=OPS[op].log, config=config)
        acc = forward_case(op, x, out)
        assert acc.ok, f"{config}: {acc}"


@pytest.mark.parametrize("op", FORWARD)
def test_rows_with_minus_inf(op, device):
    x = torch.randn(5, 300)
    x[0, ::3] = float("-inf")
    x[1, :150] = float("-inf")  # the first chunks of the row are all -inf
    x[2, 150:] = float("-inf")
    x[3, -1] = float("-inf")
    x = x.to(device)
    for config in _configs(op, 300):
        out = softmax_forward(x, -1, log=OPS[op].log, config=config)
        acc = forward_case(op, x, out)
        assert acc.ok, f"{config}: {acc}"


@pytest.mark.parametrize("op", FORWARD)
def test_all_minus_inf_row_and_nan_match_torch(op, device):
    x = torch.randn(4, 300)
    x[0] = float("-inf")
    x[1, 123] = float("nan")
    x[2, 7] = float("inf")
    x = x.to(device)
    expected = _torch(op, x.cpu())
    for config in _configs(op, 300):
        out = softmax_forward(x, -1, log=OPS[op].log, config=config).cpu()
        assert torch.equal(torch.isnan(out), torch.isnan(expected)), config
        torch.testing.assert_close(out[3], expected[3], rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("op", FORWARD)
def test_extreme_finite_values_next_to_infinities_match_torch(op, device):
    """Finite values at the ends of the fp32 range next to infinities give torch's results:
    one -FLT_MAX among -inf (one-hot), a row of -FLT_MAX (uniform; log_softmax -log(300),
    which x - (m + log d) used to round to 0), +-FLT_MAX together (one-hot), and a +inf among
    -inf (a NaN row)."""
    big = torch.finfo(torch.float32).max
    x = torch.full((5, 300), float("-inf"))
    x[0, 77] = -big                    # one -FLT_MAX among -inf: one-hot
    x[1] = -big                        # all -FLT_MAX: uniform
    x[2] = 0.0
    x[2, 10], x[2, 20] = big, -big     # exp(-FLT_MAX - FLT_MAX) underflows to 0
    x[3, 150] = float("inf")           # inf - inf: a NaN row, as in torch
    x[4, ::7] = -big                   # -FLT_MAX in every chunk, -inf around it
    x = x.to(device)
    expected = _torch(op, x.cpu())
    for config in _configs(op, 300):
        out = softmax_forward(x, -1, log=OPS[op].log, config=config).cpu()
        assert torch.equal(torch.isnan(out), torch.isnan(expected)), config
        keep = ~torch.isnan(expected)
        torch.testing.assert_close(out[keep], expected[keep], rtol=1e-5, atol=1e-6,
                                   msg=lambda m: f"{config}: {m}")


@pytest.mark.parametrize("op", FORWARD)
def test_chunk_order_does_not_matter(op, device):
    """Permuting whole chunks of a row permutes the output the same way (merge is associative)."""
    block, n_chunks = 64, 10
    x = torch.randn(3, block * n_chunks) * 4
    perm = torch.randperm(n_chunks, generator=torch.Generator().manual_seed(0))
    cols = (perm[:, None] * block + torch.arange(block)).reshape(-1)
    for config in _configs(op, x.shape[1]):
        if config["regime"] == "row":
            continue
        out = softmax_forward(x.to(device), -1, log=OPS[op].log, config=config).cpu()
        out_perm = softmax_forward(x[:, cols].to(device), -1, log=OPS[op].log, config=config).cpu()
        # A different merge order changes fp32 rounding only: a few ulps of the largest value
        # in the row's arithmetic (for log_softmax, x - m - log d reaches |x - m| ~ 40 here).
        atol = 16 * torch.finfo(torch.float32).eps * max(1.0, out.abs().max().item())
        torch.testing.assert_close(out_perm, out[:, cols], rtol=1e-5, atol=atol)


def test_warnings_as_errors_do_not_break_interpreted_kernels(device):
    """Under Triton's interpreter, kernels run on numpy, which warns on IEEE results the
    kernels mean (-inf - -inf in masked lanes, exp overflow): with RuntimeWarnings as errors
    (pytest -W error, warnings.simplefilter("error")) every call raised InterpreterError,
    even a plain softmax of ordinary inputs. On a GPU nothing warns; this passes trivially."""
    import warnings

    import numpy as np

    import flashtune

    x = torch.randn(4, 37)
    x[0, :5] = float("-inf")
    x[1] = float("-inf")
    x[2, 3] = float("nan")
    q = torch.randn(1, 2, 17, 16, dtype=torch.float16, device=device)
    before = np.geterr()
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        for fn, ref in ((flashtune.softmax, torch.softmax), (flashtune.log_softmax, torch.log_softmax)):
            for t in (x, (x * 1000).half()):
                leaf = t.to(device).requires_grad_()
                out = fn(leaf, dim=-1)
                torch.testing.assert_close(out.cpu(), ref(t, -1), equal_nan=True,
                                           rtol=1e-3, atol=1e-3)
                out.backward(torch.ones_like(out))
        flashtune.attention(q, q, q, causal=True)
    assert np.geterr() == before  # the user's numpy settings are left as they were


LONG_ROW_CASES = [("softmax", {"lane_stats": False}), ("softmax", {"lane_stats": True}),
                  ("softmax", {"lane_stats": False, "max_pass": True}),
                  ("softmax", {"lane_stats": False, "vector_stats": True}),
                  ("log_softmax", {"lane_stats": True}),
                  ("softmax_backward", {"lane_stats": False}),
                  ("softmax_backward", {"lane_stats": True}),
                  ("log_softmax_backward", {"lane_stats": False}),
                  ("log_softmax_backward", {"lane_stats": True}),
                  # segments of 20000 columns: the split regime's statistics and row sums
                  ("softmax", {"regime": "split", "splits": 2, "lane_stats": False, "max_pass": True}),
                  ("softmax_backward", {"regime": "split", "splits": 2, "lane_stats": True})]


@pytest.mark.parametrize("op,knobs", LONG_ROW_CASES,
                         ids=[f"{op}-{knobs.get('regime', 'online')}-"
                              + ("-".join(k for k, v in knobs.items() if v is True) or "chunk")
                              for op, knobs in LONG_ROW_CASES])
def test_long_rows_in_small_chunks_keep_the_accuracy_rule(op, knobs, device):
    """fp32 rows of 40000 columns in 16-wide chunks: each statistic (the forward's d, the
    backward's row sum) adds 2500 terms per lane or per chunk one after another. Uncompensated,
    their roundings add up to about sqrt(2500) half-ulps of the sum, and every output of the
    row carries that error (a GPU's vector statistics reached 8-22 ulps of the row's largest
    value, torch 2-3). The sums are compensated, so the accuracy rule holds."""
    x = (torch.randn(2, 40000) * 3).to(device)
    knobs = dict(knobs)
    regime = knobs.pop("regime", "online")
    config = OPS[op].space.validate(make_config(op, regime, dict(knobs, block=16), 40000))
    acc = run_case(op, x, config)
    assert acc.ok, f"{config}: {acc}"


BACKWARD_LONG_ROW_CASES = [("softmax_backward", "online", {"lane_stats": False}),
                           ("softmax_backward", "online", {"lane_stats": True}),
                           ("log_softmax_backward", "online", {"lane_stats": False}),
                           ("log_softmax_backward", "split", {"lane_stats": True, "splits": 2})]


@pytest.mark.parametrize("op,regime,knobs", BACKWARD_LONG_ROW_CASES,
                         ids=[f"{op}-{regime}-{'lanes' if knobs['lane_stats'] else 'chunk'}"
                              for op, regime, knobs in BACKWARD_LONG_ROW_CASES])
def test_compensated_row_sums_keep_torchs_infinite_gradients(op, regime, knobs, device):
    """A backward row sum that is +-inf (an inf in dy, or finite terms past fp32's range) gives
    torch's -inf / NaN pattern where the sums are compensated (rows of more than 32 chunks),
    not a row of NaN from the correction's inf - inf."""
    n = 16 * 80 + 5  # split: segments of 41 chunks
    log = OPS[op].log
    x = torch.randn(3, n, generator=torch.Generator().manual_seed(3)).to(device)
    y = (torch.log_softmax if log else torch.softmax)(x, -1)
    dy = torch.randn_like(y)
    dy[0, 100] = float("inf")
    if log:
        dy[1, 3::16] = 3e38  # finite terms, their sum overflows
    else:
        dy[1, 7] = float("-inf")  # sum(dy * y) <= max |dy|: only an infinite dy makes it inf
    config = OPS[op].space.validate(make_config(op, regime, dict(knobs, block=16), n))
    out = softmax_backward(y, dy, -1, log=log, config=config)
    backward_data = (torch.ops.aten._log_softmax_backward_data if log
                     else torch.ops.aten._softmax_backward_data)
    ref = backward_data(dy, y, -1, y.dtype)
    assert ref[:2].isinf().any()  # the case is what it says
    torch.testing.assert_close(out, ref, rtol=1e-4, atol=1e-5, equal_nan=True)
