"""Audit of the eager autograd path (flashtune.dispatch.eager_autograd) against torch's ops.

Each test names what used to happen; results are compared with a float64 torch reference.
"""

from __future__ import annotations

import pytest
import torch

import flashtune

from dispatch_helpers import DEVICE, fresh_db  # noqa: F401

pytestmark = [pytest.mark.filterwarnings("ignore::RuntimeWarning:triton"),
              pytest.mark.filterwarnings("ignore::flashtune.cache.CacheWarning"),
              pytest.mark.filterwarnings("ignore::UserWarning")]

PAIRS = {"softmax": (flashtune.softmax, torch.softmax),
         "log_softmax": (flashtune.log_softmax, torch.log_softmax)}

_enable_compiled_autograd = getattr(getattr(torch._dynamo, "compiled_autograd", None), "_enable",
                                    None)


# -- compiled autograd: dynamo traced the eager backward into the kernel launcher ---------------
@pytest.mark.skipif(_enable_compiled_autograd is None, reason="no compiled autograd")
@pytest.mark.parametrize("name", PAIRS)
def test_compiled_autograd_traces_the_registered_backward_op(fresh_db, name):
    """Compiled autograd (torch._dynamo.compiled_autograd) has dynamo trace each node's backward
    with fake tensors. SoftmaxFunction.backward launched the kernel directly, so dynamo traced
    into the launcher (in the interpreter: InterpreterError 'Dynamo failed to run FX node with
    fake tensors'); torch's op takes it. The backward op is one node of the traced graph."""
    ours, ref = PAIRS[name]
    op = (torch.ops.flashtune.log_softmax_backward if name == "log_softmax"
          else torch.ops.flashtune.softmax_backward)
    traced = []

    def backend(gm, example_inputs):
        traced.extend(n.target for n in gm.graph.nodes if n.op == "call_function")
        return gm.forward

    x = torch.randn(6, 10, device=DEVICE)
    g = torch.randn(6, 10, device=DEVICE)
    for dim in (-1, 0):
        torch._dynamo.reset()
        xa = x.clone().requires_grad_()
        y = ours(xa, dim)
        with _enable_compiled_autograd(torch.compile(backend=backend)):
            y.backward(g)
        xr = x.double().requires_grad_()
        ref(xr, dim).backward(g.double())
        torch.testing.assert_close(xa.grad.double(), xr.grad, atol=1e-5, rtol=1e-4)
    assert op.default in traced or op in traced
    torch._dynamo.reset()
