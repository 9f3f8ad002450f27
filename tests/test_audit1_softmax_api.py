"""Audit of the public softmax API (audit1): inputs a serious user hits that went wrong.

Each test names what used to happen; results are compared with torch's own op.
"""

from __future__ import annotations

import pytest
import torch

import flashtune

from dispatch_helpers import DEVICE, fresh_db  # noqa: F401

pytestmark = [pytest.mark.filterwarnings("ignore::RuntimeWarning:triton"),
              pytest.mark.filterwarnings("ignore::flashtune.cache.CacheWarning")]

PAIRS = {"softmax": (flashtune.softmax, torch.softmax),
         "log_softmax": (flashtune.log_softmax, torch.log_softmax)}


# -- batched gradients: the eager backward ran the kernel on a storage-less batched tensor ------
@pytest.mark.parametrize("name", PAIRS)
def test_batched_gradients_match_torch(fresh_db, name):
    """torch.autograd.grad(is_grads_batched=True) and jacobian/hessian(vectorize=True) run the
    backward under (legacy) vmap; a vmap over autograd.grad runs it under functorch's vmap. The
    kernel got the batched gradient: "Cannot access storage of BatchedTensorImpl"."""
    ours, ref = PAIRS[name]
    x = torch.randn(3, 5, device=DEVICE)
    grads = torch.randn(4, 3, 5, device=DEVICE)
    results = []
    for fn in (ours, ref):
        xa = x.clone().requires_grad_()
        y = fn(xa, 0)
        (batched,) = torch.autograd.grad(y, xa, grads, is_grads_batched=True, retain_graph=True)
        mapped = torch.func.vmap(lambda g: torch.autograd.grad(y, xa, g, retain_graph=True)[0])(grads)
        jac = torch.autograd.functional.jacobian(lambda t: fn(t, -1), x, vectorize=True)
        hess = torch.autograd.functional.hessian(
            lambda t: (fn(t, 0) * torch.arange(5.0, device=DEVICE)).sum(), x[0], vectorize=True)
        results.append((batched, mapped, jac, hess))
    torch.testing.assert_close(results[0], results[1], atol=1e-5, rtol=1e-4)
