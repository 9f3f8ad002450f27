"""Edge cases of the public ops found in review: forward-mode AD, plan reuse, layouts."""

from __future__ import annotations

import inspect

import pytest
import torch
import torch.autograd.forward_ad as fwAD

import flashtune


@pytest.mark.parametrize("log", [False, True])
def test_forward_mode_ad_keeps_the_tangent(log, device):
    x = torch.randn(3, 7, device=device)
    t = torch.randn(3, 7, device=device)
    op, ref = (flashtune.log_softmax, torch.log_softmax) if log else (flashtune.softmax, torch.softmax)
    op(x)  # a plan for this layout exists now: the dual call must still not use it
    with fwAD.dual_level():
        out = fwAD.unpack_dual(op(fwAD.make_dual(x, t)))
        expected = fwAD.unpack_dual(ref(fwAD.make_dual(x, t), -1))
    assert out.tangent is not None
    torch.testing.assert_close(out.tangent, expected.tangent, rtol=1e-4, atol=1e-5)
    torch.testing.assert_close(out.primal, expected.primal, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("log", [False, True])
@pytest.mark.parametrize("path", ["eager", "op"])
@pytest.mark.parametrize("create_graph", [False, True])
def test_forward_over_reverse_keeps_the_gradient_tangent(log, path, create_graph, device):
    # A backward run inside a dual level with a dual gradient (forward-over-reverse, recorded
    # outside it): torch's dx carries a tangent. Ours dropped it without a word
    # (create_graph=False) or raised about a custom Function's missing jvp (create_graph=True).
    x = torch.randn(3, 7, device=device)
    g, t = torch.randn(3, 7, device=device), torch.randn(3, 7, device=device)
    name = "log_softmax" if log else "softmax"
    ours = getattr(flashtune, name) if path == "eager" else getattr(torch.ops.flashtune, name)
    results = []
    for op in (ours, getattr(torch, name)):
        a = x.clone().requires_grad_()
        y = op(a, -1)
        with fwAD.dual_level():
            (dx,) = torch.autograd.grad(y, a, fwAD.make_dual(g, t), create_graph=create_graph)
            results.append(fwAD.unpack_dual(dx))
    got, expected = results
    assert got.tangent is not None
    torch.testing.assert_close(got.primal, expected.primal, rtol=1e-4, atol=1e-5)
    torch.testing.assert_close(got.tangent, expected.tangent, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("name", ["softmax", "log_softmax", "softmax_backward",
                                  "log_softmax_backward"])
def test_registered_ops_refuse_a_dual_input(name, device):
    # torch drops a custom op's tangent silently when no input requires grad.
    x = torch.softmax(torch.randn(3, 7, device=device), -1)
    with fwAD.dual_level():
        dual = fwAD.make_dual(x, torch.randn_like(x))
        args = (dual, -1) if "backward" not in name else (x, dual, -1)
        with pytest.raises(NotImplementedError, match="forward-mode AD"):
            getattr(torch.ops.flashtune, name)(*args)
        out = getattr(torch.ops.flashtune, name)(*[x if a is dual else a for a in args])
        assert fwAD.unpack_dual(out).tangent is None  # plain inputs in a dual level are fine


@pytest.mark.parametrize("log", [False, True])
def test_double_backward_keeps_a_dual_tangent_towards_the_first_gradient(log, device):
    # The second backward (in a dual level) reaches the first gradient g through the backward
    # op's own backward: for softmax that ran the registered op, which dropped the tangent.
    name = "log_softmax" if log else "softmax"
    x, g0, w, t = (torch.randn(3, 7, device=device) for _ in range(4))
    results = []
    for op in (getattr(flashtune, name), getattr(torch, name)):
        a, g = x.clone().requires_grad_(), g0.clone().requires_grad_()
        (dx,) = torch.autograd.grad(op(a, -1), a, g, create_graph=True)
        with fwAD.dual_level():
            (h,) = torch.autograd.grad(dx, g, fwAD.make_dual(w, t))
            results.append(fwAD.unpack_dual(h))
    got, expected = results
    assert got.tangent is not None
    torch.testing.assert_close(got.primal, expected.primal, rtol=1e-4, atol=1e-5)
    torch.testing.assert_close(got.tangent, expected.tangent, rtol=1e-4, atol=1e-5)


def test_float_dim_rejected_even_after_a_plan_exists(device):
    x = torch.randn(3, 7, device=device)
    flashtune.softmax(x, 1)
    with pytest.raises(TypeError, match="dim must be an int"):
        flashtune.softmax(x, 1.0)


def test_meta_tensor_never_takes_a_cpu_plan():
    x = torch.randn(3, 7)
    flashtune.softmax(x)
    out = flashtune.softmax(torch.empty(3, 7, device="meta"))
    assert out.device.type == "meta" and out.shape == (3, 7)


def test_sparse_input_is_a_clear_type_error():
    with pytest.raises(TypeError, match="layout"):
        flashtune.softmax(torch.randn(3, 7).to_sparse())


@pytest.mark.parametrize("shape,dtype", [((4.5, 5), "float16"), ((4,), "float16"),
                                         ((-1, 5), "float16"), ((4, 5), "int8")])
def test_dispatch_choice_checks_its_arguments(shape, dtype):
    from flashtune.dispatch import choice

    with pytest.raises(ValueError, match="shape|dtype"):
        choice("softmax", shape, dtype)


# -- torch's signature: softmax(input, dim, dtype=None) -----------------------------------------
OPS = [(flashtune.softmax, torch.softmax), (flashtune.log_softmax, torch.log_softmax)]


@pytest.mark.parametrize("ours,theirs", OPS, ids=["softmax", "log_softmax"])
def test_torch_style_keyword_calls(ours, theirs, device):
    """torch.softmax's first argument is ``input``: torch-style keyword calls used to be a
    TypeError (ours was named ``x``). Twice each: the second call takes the stored plan."""
    x = torch.randn(3, 7, device=device)
    for _ in range(2):
        torch.testing.assert_close(ours(input=x, dim=-1), theirs(input=x, dim=-1))
        torch.testing.assert_close(ours(dim=0, input=x), theirs(dim=0, input=x))
        torch.testing.assert_close(ours(input=x, dim=1, dtype=torch.float64),
                                   theirs(input=x, dim=1, dtype=torch.float64))
        torch.testing.assert_close(ours(x, 1, torch.float64), theirs(x, 1, torch.float64))
    assert list(inspect.signature(ours).parameters)[:3] == ["input", "dim", "dtype"]


@pytest.mark.parametrize("ours,theirs", OPS, ids=["softmax", "log_softmax"])
def test_the_former_x_keyword_still_works(ours, theirs, device):
    """``x=``: the former name of ``input`` (torch.softmax takes it too, as numpy's spelling)."""
    x = torch.randn(3, 7, device=device)
    for _ in range(2):
        torch.testing.assert_close(ours(x=x), theirs(x, -1))
        torch.testing.assert_close(ours(x=x, dim=0), theirs(x, 0))
        torch.testing.assert_close(ours(x=x, dtype=torch.float64), theirs(x, -1, torch.float64))


@pytest.mark.parametrize("ours", [o for o, _ in OPS], ids=["softmax", "log_softmax"])
def test_input_given_twice_or_not_at_all_is_a_type_error(ours, device):
    x = torch.randn(3, 7, device=device)
    for _ in range(2):  # the second time a plan for x exists: x= must not be ignored then
        with pytest.raises(TypeError, match="input twice"):
            ours(x, x=x)
        with pytest.raises(TypeError, match="input twice"):
            ours(input=x, x=x * 2)
        ours(x)
    with pytest.raises(TypeError, match="missing required argument 'input'"):
        ours()
    with pytest.raises(TypeError, match="missing required argument 'input'"):
        ours(dim=-1)
    with pytest.raises(TypeError, match=r"missing required argument 'input'.*\(or None\)"):
        ours(None, -1)
    with pytest.raises(TypeError, match="^x must be a torch.Tensor, got list"):
        ours(x=[1.0, 2.0])
    with pytest.raises(TypeError, match="^input must be a torch.Tensor, got list"):
        ours([1.0, 2.0])


@pytest.mark.parametrize("ours", [o for o, _ in OPS], ids=["softmax", "log_softmax"])
def test_an_explicit_none_input_with_x_is_a_type_error(ours, device):
    """softmax(None, x=t) gives the input twice (torch.softmax rejects the None): it used to
    run on ``x`` as if ``input`` had been left out."""
    x = torch.randn(3, 7, device=device)
    for _ in range(2):  # the second time with a stored plan for x
        with pytest.raises(TypeError, match="input twice"):
            ours(None, x=x)
        with pytest.raises(TypeError, match="input twice"):
            ours(input=None, x=x, dim=0)
        ours(x=x)


@pytest.mark.parametrize("ours,theirs", OPS, ids=["softmax", "log_softmax"])
def test_a_fourth_positional_argument_is_refused_like_torch(ours, theirs, device):
    """torch.softmax takes at most 3 positional arguments. A fourth one filled ``x`` (the
    former name of ``input``), so softmax(t, -1, None, None) ran as softmax(t, -1)."""
    x = torch.randn(3, 7, device=device)
    with pytest.raises(TypeError):
        theirs(x, -1, None, None)
    for _ in range(2):  # the second time a plan for x exists
        with pytest.raises(TypeError, match="at most 3 positional arguments"):
            ours(x, -1, None, None)
        with pytest.raises(TypeError, match="at most 3 positional arguments"):
            ours(x, -1, None, x)
        with pytest.raises(TypeError, match="at most 3 positional arguments"):
            ours(x, x=None)
        ours(x, -1, None)
    with pytest.raises(TypeError, match="missing required argument 'input'"):
        ours(x=None)


@pytest.mark.parametrize("log", [False, True])
def test_a_stored_plan_that_fails_gives_way_to_the_full_path(log, device):
    """A plan's kernel can fail on a later call of the same layout (another pointer alignment
    compiles a new specialization inside the plan): that reached the user's model, where the
    full path falls back from a failing tuned config and says so."""
    from flashtune.dispatch import reset
    from flashtune.dispatch.runtime import RUNTIME

    op, ref = (flashtune.log_softmax, torch.log_softmax) if log else (flashtune.softmax, torch.softmax)
    reset()
    x = torch.randn(6, 40, device=device)
    op(x)
    plans = RUNTIME.plans["log_softmax" if log else "softmax"]
    assert plans

    def broken(_x):
        raise RuntimeError("planted: the plan's kernel failed")

    for key in list(plans):
        plans[key] = broken
    torch.testing.assert_close(op(x), ref(x, -1))
    assert all(plan is not broken for plan in plans.values())  # forgotten, or replaced
    # the backward's plans too
    xg = x.clone().requires_grad_()
    g = torch.randn_like(x)
    op(xg).backward(g)
    backward_plans = RUNTIME.backward_plans["log_softmax" if log else "softmax"]
    assert backward_plans
    for key in list(backward_plans):
        backward_plans[key] = broken
    xg.grad = None
    op(xg).backward(g)
    xt = x.clone().requires_grad_()
    ref(xt, -1).backward(g)
    torch.testing.assert_close(xg.grad, xt.grad)
    reset()


def _fx_model(ops):
    class Model(torch.nn.Module):
        def forward(self, z):
            return ops.softmax(z, -1) * ops.log_softmax(z, dim=0, dtype=torch.float32)
    return Model()


def test_fx_symbolic_trace_records_the_op(device):
    # torch.fx.symbolic_trace passes a Proxy, which torch.softmax records as a node; ours
    # raised "input must be a torch.Tensor, got Proxy". Each call is one node now.
    traced = torch.fx.symbolic_trace(_fx_model(flashtune))
    calls = [n for n in traced.graph.nodes if n.op == "call_function"
             and getattr(n.target, "__name__", "") == "_softmax_node"]
    assert len(calls) == 2
    x = torch.randn(5, 6, device=device, requires_grad=True)
    got = traced(x)
    torch.testing.assert_close(got, _fx_model(torch)(x.detach()), rtol=1e-4, atol=1e-5)
    got.sum().backward()
    assert x.grad is not None and x.grad.shape == x.shape


def test_fx_traced_softmax_runs_as_the_model_does(device):
    # The traced module ran torch.ops.flashtune.* where the model runs flashtune.softmax:
    # under torch.func.grad / jacrev it raised torch's RuntimeError about an autograd.Function
    # without setup_context, and a forward-AD dual input a NotImplementedError, where the
    # model (and torch.softmax traced) work. A dim computed from the input (a Proxy while
    # tracing) must trace too.
    class Model(torch.nn.Module):
        def forward(self, z):
            return flashtune.softmax(z, z.dim() - 1) * flashtune.log_softmax(z, 0)

    model = Model()
    traced = torch.fx.symbolic_trace(model)
    x, w = torch.randn(4, 6, device=device), torch.randn(4, 6, device=device)
    want = torch.func.grad(lambda a: (model(a) * w).sum())(x)
    got = torch.func.grad(lambda a: (traced(a) * w).sum())(x)
    torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-5)
    torch.testing.assert_close(torch.func.jacrev(traced)(x), torch.func.jacrev(model)(x),
                               rtol=1e-4, atol=1e-5)
    t = torch.randn_like(x)
    with fwAD.dual_level():
        got = fwAD.unpack_dual(traced(fwAD.make_dual(x, t)))
        want = fwAD.unpack_dual(model(fwAD.make_dual(x, t)))
    torch.testing.assert_close(got.tangent, want.tangent, rtol=1e-4, atol=1e-5)


def test_fx_symbolic_trace_at_the_first_access_to_softmax(tmp_path, device):
    # `import flashtune` before `import torch`: flashtune.ops is imported inside the trace, at
    # the first access to flashtune.softmax (a torch.fx.wrap leaf registered then would not be
    # patched by this trace; see call_state.fx_node).
    import os
    import subprocess
    import sys

    script = ("import sys\nimport flashtune\nimport torch\n"
              "class M(torch.nn.Module):\n"
              "    def forward(self, z):\n"
              "        return flashtune.log_softmax(z, 0, torch.float32)\n"
              "traced = torch.fx.symbolic_trace(M())\n"
              "x = torch.randn(3, 5, dtype=torch.float16, device=sys.argv[1])\n"
              "torch.testing.assert_close(traced(x), torch.log_softmax(x.float(), 0))\n"
              "print('ok')\n")
    # On this run's device: the interpreter on CPU tensors, or the GPU.
    env = dict(os.environ, TRITON_INTERPRET="1" if device == "cpu" else "0",
               FLASHTUNE_CACHE_DIR=str(tmp_path), FLASHTUNE_DB=str(tmp_path / "none.sqlite"))
    done = subprocess.run([sys.executable, "-c", script, device], capture_output=True, text=True,
                          env=env, timeout=300)
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr[-2000:]
