"""Strided and offset views: the dispatcher's choice sees their row starts, not only the width.

A (rows, 4096) slice of a (rows, 4097) tensor has whole rows but rows that start off 16-byte
boundaries. The loop kernels keep 16-byte vectors there only with the aligned walk (``align``),
which the defaults used to give by width alone: such views loaded element by element.
"""

from __future__ import annotations

import pytest
import torch

import flashtune
import flashtune.dispatch as dispatch
from dispatch_helpers import DEVICE, fresh_db  # noqa: F401
from flashtune.gen.softmax_ops import rows_problem
from flashtune.gen.softmax_space import (GRAIN_FIELD, SoftmaxProblem, default_config,
                                         problem_bucket, with_view_grain)

pytestmark = [pytest.mark.filterwarnings("ignore::RuntimeWarning:triton"),
              pytest.mark.filterwarnings("ignore::flashtune.cache.CacheWarning")]

F16 = torch.float16


def _columns(rows: int, cols: int, stride: int, offset: int = 0, dtype=F16, device="cpu"):
    """A (rows, cols) view with row stride ``stride``, starting ``offset`` elements into a
    fresh (aligned) allocation."""
    storage = torch.randn(offset + rows * stride, device=device).to(dtype)
    return storage[offset:].as_strided((rows, cols), (stride, 1))


@pytest.mark.parametrize("make,grain", [
    (lambda: torch.empty(8, 4096, dtype=F16), None),                 # packed
    (lambda: _columns(8, 4096, 4097), 1),                            # slice of a wider tensor
    (lambda: torch.empty(8, 4097, dtype=F16)[:, 1:], 1),             # the first column dropped
    (lambda: _columns(8, 4096, 4104), 8),                            # stride of 8 mod 16
    (lambda: _columns(8, 4096, 4096, offset=16), None),              # offset of whole vectors
    (lambda: _columns(8, 4096, 4096, offset=4), 4),
    (lambda: _columns(8, 4096, 4098, dtype=torch.float32), 2),
    (lambda: _columns(8, 4096, 4100, dtype=torch.float32), None),    # fp32: one vector is 4
    (lambda: torch.empty(1, 4097, dtype=F16)[:, :4096], None),      # one row: no stride
    (lambda: _columns(8, 4097, 4100), None),                         # the width says it already
])
def test_rows_problem_takes_the_views_grain(make, grain):
    x = make()
    problem = rows_problem(x, 1)
    assert (problem.n_rows, problem.n_cols) == tuple(x.shape)
    assert problem.view_grain == grain
    if grain is None:  # the packed problem itself: same decisions, same cache bucket
        assert problem == SoftmaxProblem(x.shape[0], x.shape[1], problem.dtype)


def test_views_that_the_ops_copy_count_as_packed():
    """A dim whose moved axis is not unit-stride, or leading dims that do not merge, are
    copied into a packed buffer before the kernel runs: their own strides do not matter."""
    x = torch.empty(4096, 9, dtype=F16)
    assert rows_problem(x, 0).view_grain is None  # softmax along dim 0: a transposed copy
    unmerged = torch.empty(2, 4, 4097, dtype=F16)[:, :3, :4096]  # (2, 3) rows do not merge
    assert rows_problem(unmerged, 2).view_grain is None
    merged = torch.empty(2, 3, 4097, dtype=F16)[:, :, :4096]
    assert rows_problem(merged, 2).view_grain == 1


def test_backward_problem_takes_dys_grain_too():
    y = torch.empty(8, 4096, dtype=F16)
    dy = _columns(8, 4096, 4097)
    assert rows_problem(y, 1).view_grain is None
    assert rows_problem(y, 1, dy).view_grain == 1


@pytest.mark.parametrize("dtype,cols,stride", [
    ("float16", 65536, 65537), ("bfloat16", 65536, 65544), ("float32", 65536, 65538)])
def test_many_long_rows_of_an_odd_stride_take_the_aligned_walk(dtype, cols, stride):
    packed = SoftmaxProblem(4096, cols, dtype)
    view = with_view_grain(packed, stride)
    assert default_config("softmax", packed)["align"] is False
    for op in ("softmax", "log_softmax", "softmax_backward", "log_softmax_backward"):
        config = default_config(op, view)
        assert config["regime"] == "online" and config["align"] is True, op


@pytest.mark.parametrize("stride,align", [(1048577, True), (1048578, True), (1048580, True),
                                          (1048584, False), (1048592, False)])
def test_few_long_rows_split_aligns_below_a_vector(stride, align):
    """The split kernels take strides in grains: a stride of whole 16-byte vectors (8 fp16)
    keeps vectors without the walk."""
    view = with_view_grain(SoftmaxProblem(4, 1 << 20, "float16"), stride)
    for op in ("softmax", "softmax_backward"):
        config = default_config(op, view)
        assert config["regime"] == "split" and config["align"] is align, (op, stride)


def test_narrow_rows_of_an_odd_stride_take_the_odd_width_tiles():
    packed = SoftmaxProblem(200000, 64, "float16")
    odd = default_config("softmax", SoftmaxProblem(200000, 63, "float16"))
    config = default_config("softmax", with_view_grain(packed, 65))
    assert config["regime"] == "row"
    assert (config["rows_per_program"], config["num_warps"]) == (
        odd["rows_per_program"], odd["num_warps"])
    assert config != default_config("softmax", packed)


def test_a_views_bucket_is_its_grains():
    """Cache lookups of a view take winners tuned on rows of its grain, not the packed
    width's (a must-match field)."""
    packed = SoftmaxProblem(4096, 65536, "float16")
    assert GRAIN_FIELD not in problem_bucket(packed)
    assert problem_bucket(with_view_grain(packed, 65537))[GRAIN_FIELD] == 1
    assert problem_bucket(with_view_grain(packed, 65544))[GRAIN_FIELD] == 8


def _decisions(op: str):
    return {key[-1]: choice for key, choice in dispatch.RUNTIME.dispatcher._choices.items()
            if key[0] == op}


def test_runtime_decides_views_apart_and_gives_torchs_result(fresh_db):
    """Through the public op: a strided view and a packed tensor of one shape get separate
    decisions (the view's with the aligned walk), and both give torch's result."""
    rows, cols = 2, 65536  # few long rows: the split regime
    view = _columns(rows, cols, cols + 1, device=DEVICE)
    packed = view.contiguous()
    for x in (view, packed, view):
        torch.testing.assert_close(flashtune.softmax(x).float(),
                                   torch.softmax(x.double(), -1).float(), rtol=2e-3, atol=2e-6)
    made = _decisions("softmax")
    assert made[1].config["align"] is True and made[1].problem.view_grain == 1
    assert made[None].config["align"] is False


def test_runtime_backward_decides_on_dys_layout(fresh_db):
    rows, cols = 2, 65536
    x = torch.randn(rows, cols, device=DEVICE).to(F16).requires_grad_()
    y = flashtune.log_softmax(x)
    dy = _columns(rows, cols, cols + 1, device=DEVICE)
    y.backward(dy)
    y64 = torch.log_softmax(x.detach().double(), -1)
    want = dy.double() - y64.exp() * dy.double().sum(-1, keepdim=True)
    torch.testing.assert_close(x.grad.float(), want.float(), rtol=4e-3, atol=4e-3)
    made = _decisions("log_softmax_backward")
    assert made[1].config["align"] is True
