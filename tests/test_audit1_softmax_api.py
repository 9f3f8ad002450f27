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


# -- results were views: in-place ops on them raised under autograd ----------------------------
def _view_layouts():
    yield "dim 0", lambda: torch.randn(3, 4, device=DEVICE), 0
    yield "transposed, dim -1", lambda: torch.randn(4, 3, device=DEVICE).t(), -1
    yield "3-D transposed, dim -1", lambda: torch.randn(2, 4, 3, device=DEVICE).transpose(1, 2), -1
    yield "channels_last, dim 1", lambda: torch.randn(1, 2, 3, 4, device=DEVICE).to(
        memory_format=torch.channels_last), 1


@pytest.mark.parametrize("name", PAIRS)
@pytest.mark.parametrize("case", list(_view_layouts()), ids=lambda c: c[0])
@pytest.mark.parametrize("leaf", ["tensor", "parameter"])
def test_result_takes_in_place_ops_under_autograd(fresh_db, name, case, leaf):
    """The result along a dim other than the last (or of a non-contiguous input) was a movedim
    view of the kernel's buffer: an in-place op on it (masked_fill_, clamp_, an in-place
    activation) raised "Output 0 of SoftmaxFunction is a view and is being modified inplace"
    (the registered op's autograd too, e.g. for an nn.Parameter), where torch.softmax's result
    takes it. The layout stays the one the fake implementation promises."""
    from flashtune.dispatch.plans import output_like

    ours, ref = PAIRS[name]
    _, make, dim = case
    base = make()
    for _ in range(2):  # the first call builds the plan, the second runs it
        x = torch.nn.Parameter(base.clone()) if leaf == "parameter" else base.clone().requires_grad_()
        y = ours(x, dim)
        assert y._base is None and y.stride() == output_like(x, dim).stride()
        y.mul_(2)  # used to raise
        torch.testing.assert_close(y, ref(base, dim) * 2)
    with torch.no_grad():
        assert ours(base, dim)._base is None
    y = ours(base.clone().requires_grad_(), dim)
    y.add_(1)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        y.sum().backward()  # as torch: the backward needs the unmodified result


@pytest.mark.parametrize("name", PAIRS)
def test_gradients_along_other_dims_match_torch(fresh_db, name):
    ours, ref = PAIRS[name]
    x = torch.randn(3, 4, 5, device=DEVICE)
    for dim in (0, 1):
        xa = x.clone().requires_grad_()
        g = torch.randn(3, 4, 5, device=DEVICE)
        ours(xa, dim).backward(g)
        xt = x.clone().requires_grad_()
        ref(xt, dim).backward(g)
        torch.testing.assert_close(xa.grad, xt.grad, atol=1e-5, rtol=1e-4)


# -- `import torch, flashtune` did not register torch.ops.flashtune.* ----------------------------
def test_import_registers_the_ops_for_export_load(tmp_path):
    """A program exported with flashtune.softmax calls torch.ops.flashtune.softmax; loading it in
    a new process after `import torch, flashtune` failed ("We failed to resolve
    torch.ops.flashtune.softmax.default to an operator"), as did direct calls of the ops: they
    were registered only on the first access to flashtune.softmax."""
    import os
    import subprocess
    import sys

    path = tmp_path / "program.pt2"
    save = ("import torch, flashtune\n"
            "class M(torch.nn.Module):\n"
            "    def forward(self, t):\n"
            "        return flashtune.softmax(t, 0) + flashtune.log_softmax(t, -1)\n"
            f"torch.export.save(torch.export.export(M(), (torch.randn(3, 5),)), {str(path)!r})\n")
    load = ("import torch, flashtune\n"
            "torch.ops.flashtune.softmax_backward, torch.ops.flashtune.log_softmax_backward\n"
            "torch.ops.flashtune.attention_fwd\n"
            f"program = torch.export.load({str(path)!r}).module()\n"
            "x = torch.randn(3, 5)\n"
            "torch.testing.assert_close(program(x), torch.softmax(x, 0) + torch.log_softmax(x, -1))\n"
            "print('loaded')\n")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [
        os.path.dirname(os.path.dirname(flashtune.__file__)), os.environ.get("PYTHONPATH")])))
    for code in (save, load):
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
        assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip() == "loaded"


# -- nn.Parameter inputs took the registered op (its host cost) -------------------------------
@pytest.mark.parametrize("name", PAIRS)
def test_parameter_input_takes_the_eager_paths(fresh_db, name):
    """softmax of a learned weight (mixture or gating weights: F.softmax(self.alpha, 0)) is an
    nn.Parameter, which disables __torch_function__, yet it was sent through the registered op
    as a tensor subclass: the host cost eager_autograd exists to avoid (several times that of
    the plain autograd.Function), and no stored plan under no_grad."""
    from flashtune.dispatch import RUNTIME

    ours, ref = PAIRS[name]
    w = torch.nn.Parameter(torch.randn(4, 6, device=DEVICE))
    y = ours(w, 0)
    assert type(y) is torch.Tensor and type(y.grad_fn).__name__ == "SoftmaxFunctionBackward"
    g = torch.randn(4, 6, device=DEVICE)
    y.backward(g)
    wt = w.detach().clone().requires_grad_()
    ref(wt, 0).backward(g)
    torch.testing.assert_close(w.grad, wt.grad, atol=1e-5, rtol=1e-4)
    with torch.no_grad():
        out = ours(w, 0)
        assert type(out) is torch.Tensor
        torch.testing.assert_close(out, ref(w, 0))
        plans = RUNTIME.plans[name]
        key = (w.shape, w.stride(), w.dtype, w.device, 0)
        assert key in plans
        plans[key] = lambda x: "hot plan"
        assert ours(w, 0) == "hot plan"  # the hot path serves a Parameter too
