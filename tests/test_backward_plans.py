"""The eager backward's plans: the direct path for contiguous (y, dy) reduced along the last dim
(no row views built per call) and the general path for every other layout give torch's dx with
torch's layout, and each layout gets the path that fits it."""

from __future__ import annotations

import pytest
import torch

from flashtune.dispatch import plans
from flashtune.dispatch.plans import output_like
from flashtune.dispatch.runtime import RUNTIME
from flashtune.reference import check_accuracy, softmax_backward_ref, softmax_backward_scale

aten = torch.ops.aten


def _torch_dx(y, dy, dim, log):
    backward = aten._log_softmax_backward_data if log else aten._softmax_backward_data
    return backward(dy, y, dim, y.dtype)


def _pair(shape, dtype, device, log, dim=-1):
    x = torch.randn(shape, dtype=dtype, device=device)
    y = (torch.log_softmax if log else torch.softmax)(x, dim)
    return y, torch.randn_like(y)


def _check(dx, y, dy, dim, log):
    peer = _torch_dx(y, dy, dim, log)
    assert dx.shape == peer.shape and dx.dtype == peer.dtype
    # the kernels' layout (reduced dim innermost, README "Differences from torch"): torch's
    # own for contiguous tensors reduced along their last dim
    assert dx.stride() == output_like(y, dim % y.dim()).stride()
    acc = check_accuracy(dx, softmax_backward_ref(y, dy, dim, log), peer,
                         scale=softmax_backward_scale(y, dy, dim, log))
    assert acc.ok, acc


def _no_row_views(*args, **kwargs):
    raise AssertionError("the direct path built row views")


@pytest.mark.parametrize("log", [False, True])
@pytest.mark.parametrize("shape", [(5, 37), (2, 3, 37), (1, 4, 1, 37)])
def test_contiguous_pairs_take_the_direct_path(shape, log, device, monkeypatch):
    y, dy = _pair(shape, torch.float16, device, log)
    plan = plans.backward_plan(y, y.dim() - 1, "log_softmax_backward" if log else "softmax_backward",
                               RUNTIME.dispatcher.choice(
                                   "log_softmax_backward" if log else "softmax_backward",
                                   plans.problem_of(y, y.dim() - 1), y.device).config, dy=dy)
    monkeypatch.setattr(plans, "_as_rows", _no_row_views)
    monkeypatch.setattr(plans, "_as_output_rows", _no_row_views)
    for _ in range(2):  # the plan is reused with new tensors of the same layout
        y, dy = _pair(shape, torch.float16, device, log)
        _check(plan(y, dy), y, dy, -1, log)


def test_size_one_dims_with_odd_strides_keep_torchs_layout(device):
    """is_contiguous ignores the strides of size-1 dims: dx must still have the layout torch
    gives (dense), whatever strides y's size-1 dims carry."""
    base_y, base_dy = _pair((4, 1, 37), torch.float32, device, False)
    y = base_y.as_strided((4, 1, 37), (37, 999, 1))
    dy = base_dy.as_strided((4, 1, 37), (37, 5, 1))
    assert y.is_contiguous() and dy.is_contiguous()
    dx = RUNTIME.backward(y, dy, -1, False)
    _check(dx, y, dy, -1, False)
    assert dx.stride() == _torch_dx(y, dy, -1, False).stride() == (37, 37, 1)


@pytest.mark.parametrize("log", [False, True])
def test_other_layouts_take_the_general_path(log, device):
    """dy transposed, dy expanded, a reduction along dim 0, a sliced y: each its own plan (the key
    holds both strides), each right."""
    y, dy = _pair((6, 40), torch.float32, device, log)
    cases = [
        (y, dy.t().contiguous().t(), -1),                       # dy column-major
        (y, torch.randn(1, 40, device=device).expand(6, 40), -1),  # dy broadcast (stride 0)
        (y, dy, 0),                                              # reduce along rows
        (y[:, ::2], dy[:, ::2], -1),                             # strided columns
    ]
    for yy, dd, dim in cases:
        if dim == 0:
            yy = (torch.log_softmax if log else torch.softmax)(torch.randn(6, 40, device=device), 0)
        _check(RUNTIME.backward(yy, dd, dim, log), yy, dd, dim, log)
    # the contiguous pair after all of them still gets a right answer from its own plan
    _check(RUNTIME.backward(y, dy, -1, log), y, dy, -1, log)
