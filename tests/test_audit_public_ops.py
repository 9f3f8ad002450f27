"""Audit of the public ops with odd inputs, against torch's own op in float64 on the CPU.

Kept here: what the existing suites did not already pin down.
- The registered backward ops' fake (meta) implementations refuse what the eager ones refuse:
  a call mixing a meta and a CPU tensor ran the fake and returned an uninitialized CPU tensor,
  and y/dy of different shapes or a non-floating dy traced without error.
- Half-precision gradients under the interpreter (elsewhere only on a GPU), with the gradient
  layouts autograd really hands over: stride 0 (``y.sum().backward()``), transposed, stepped,
  and non-contiguous inputs reduced along every dim of a 5-D tensor, judged by the project's
  accuracy rule against float64.
"""

from __future__ import annotations

import pytest
import torch

import flashtune
from flashtune.reference import (check_accuracy, softmax_backward_ref, softmax_backward_scale,
                                 softmax_ref)

from dispatch_helpers import DEVICE, fresh_db  # noqa: F401

pytestmark = [pytest.mark.filterwarnings("ignore::RuntimeWarning:triton"),
              pytest.mark.filterwarnings("ignore::flashtune.cache.CacheWarning")]

BACKWARD_OPS = ("softmax_backward", "log_softmax_backward")


def _backward_op(name):
    flashtune.softmax  # noqa: B018 - binds flashtune.ops, which registers torch.ops.flashtune.*
    return getattr(torch.ops.flashtune, name)


@pytest.mark.parametrize("name", BACKWARD_OPS)
def test_backward_op_refuses_a_meta_and_a_cpu_tensor(fresh_db, name):
    """The meta key wins the dispatch, so the fake ran: it handed back an uninitialized CPU
    tensor where the eager op (and torch's _softmax_backward_data) refuses the device mix."""
    op = _backward_op(name)
    y = torch.softmax(torch.randn(3, 5), -1)
    for pair in ((y, y.to("meta")), (y.to("meta"), y)):
        with pytest.raises(ValueError, match="one device"):
            op(*pair, 1)


@pytest.mark.parametrize("name", BACKWARD_OPS)
def test_backward_op_fake_checks_shape_and_dtype_like_eager(fresh_db, name):
    """torch.compile traces with the fake: a call the eager op rejects must not trace."""
    op = _backward_op(name)
    y = torch.empty(3, 5, device="meta")
    with pytest.raises(ValueError, match="one shape"):
        op(y, torch.empty(5, 3, device="meta"), 1)
    with pytest.raises(TypeError, match="dy has dtype torch.int32"):
        op(y, torch.empty(3, 5, device="meta", dtype=torch.int32), 1)


def _grad_layouts(dtype):
    """(label, x, dim, grad): odd input layouts and the gradient layouts autograd produces."""
    x = torch.randn(4, 33, device=DEVICE).to(dtype) * 3
    yield "sum().backward(): stride-0 grad", x, -1, torch.ones((), device=DEVICE, dtype=dtype).expand(4, 33)
    yield "row-broadcast grad", x, -1, torch.randn(1, 33, device=DEVICE).to(dtype).expand(4, 33)
    yield "transposed grad", x, 0, torch.randn(33, 4, device=DEVICE).to(dtype).t()
    yield "stepped grad", x, -1, torch.randn(4, 66, device=DEVICE).to(dtype)[:, ::2]
    five = torch.randn(3, 2, 1, 4, 5, device=DEVICE).to(dtype).transpose(1, 3)  # (3, 4, 1, 2, 5)
    for dim in range(-5, 0):
        yield f"5-D transposed, dim {dim}", five, dim, None
    yield "1-D", torch.randn(17, device=DEVICE).to(dtype), 0, None
    yield "width 1", torch.randn(5, 1, device=DEVICE).to(dtype), -1, None


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
@pytest.mark.parametrize("log", [False, True])
def test_gradients_on_odd_layouts_pass_the_accuracy_rule(fresh_db, log, dtype):
    ours, theirs = (flashtune.log_softmax, torch.log_softmax) if log else (flashtune.softmax,
                                                                            torch.softmax)
    for label, x, dim, g in _grad_layouts(dtype):
        if g is None:
            g = torch.randn(x.shape, device=DEVICE).to(dtype)
        xa = x.detach().clone().requires_grad_()
        y = ours(xa, dim)
        y.backward(g)
        xt = x.detach().clone().requires_grad_()
        theirs(xt, dim).backward(g)  # torch in the same dtype: the peer of the accuracy rule
        y_ref = softmax_ref(x, dim, log)
        fwd = check_accuracy(y, y_ref, theirs(x, dim))
        assert fwd.ok, f"{label}: forward {fwd}"
        assert xa.grad.dtype == dtype and xa.grad.shape == x.shape, label
        bwd = check_accuracy(xa.grad, softmax_backward_ref(y_ref, g, dim, log), xt.grad,
                             scale=softmax_backward_scale(y_ref, g, dim, log))
        assert bwd.ok, f"{label}: backward {bwd}"


@pytest.mark.parametrize("dtype", [torch.float8_e4m3fn, torch.float8_e5m2, torch.int32,
                                   torch.complex64, torch.bool])
@pytest.mark.parametrize("op", [flashtune.softmax, flashtune.log_softmax])
def test_unsupported_dtype_argument_is_named_in_the_error(fresh_db, op, dtype):
    # Defect: dtype=float8 passed the cast's floating check and the error then named x, which
    # the caller had given as float32.
    x = torch.randn(3, 5)
    with pytest.raises(TypeError, match=r"^dtype=torch\.\w+ is not supported"):
        op(x, -1, dtype=dtype)


@pytest.mark.parametrize("op,theirs", [(flashtune.softmax, torch.softmax),
                                       (flashtune.log_softmax, torch.log_softmax)])
def test_python_float_as_dtype_is_float64_as_in_torch(fresh_db, op, theirs):
    # Defect: torch.softmax(x, -1, float) computes in float64 (torch's argument parser takes
    # Python's scalar types as dtypes); ours raised "dtype must be a torch.dtype".
    x = torch.randn(3, 5)
    for dtype in (float, torch.float64):
        out = op(x, -1, dtype=dtype)
        assert out.dtype == torch.float64
        torch.testing.assert_close(out, theirs(x, -1, dtype=float))
    with pytest.raises(TypeError, match=r"^dtype=torch\.int64 is not supported"):
        op(x, -1, dtype=int)
    with pytest.raises(TypeError, match=r"^dtype must be a torch\.dtype or None, got str"):
        op(x, -1, dtype="float32")  # torch refuses strings too
