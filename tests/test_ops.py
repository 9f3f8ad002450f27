"""flashtune.softmax / log_softmax as a user sees them: results like torch on any layout,
autograd, torch.compile(fullgraph=True), torch.library.opcheck and float64 gradcheck.

Without a GPU the kernels run in Triton's interpreter on CPU tensors (tests/conftest.py); the
fp16/bf16 gradient checks need a GPU (``-m gpu``).
"""

from __future__ import annotations

import pytest
import torch

import flashtune
import flashtune.dispatch as dispatch
from flashtune.dispatch.plans import output_like

from dispatch_helpers import DEVICE, fresh_db  # noqa: F401

pytestmark = [pytest.mark.filterwarnings("ignore::RuntimeWarning:triton"),
              pytest.mark.filterwarnings("ignore::flashtune.cache.CacheWarning")]

FNS = {"softmax": (flashtune.softmax, torch.softmax),
       "log_softmax": (flashtune.log_softmax, torch.log_softmax)}


def _layouts():
    base = torch.randn(6, 5, 40, device=DEVICE)
    yield "2d", base[0], -1
    yield "2d-dim0", base[0], 0
    yield "3d-last", base, 2
    yield "3d-middle", base, 1
    yield "3d-first", base, -3
    yield "transposed", base[0].t(), -1
    yield "column-slice", base[:, 1, 3:30], -1  # row stride 200, unit column stride
    yield "1d", base[0, 0], 0
    yield "0d", base[0, 0, 0], -1
    yield "empty", base[:0], -1


@pytest.mark.parametrize("name", FNS)
@pytest.mark.parametrize("case", [c[0] for c in _layouts()])
def test_matches_torch_on_any_layout(fresh_db, name, case):
    _, x, dim = next(c for c in _layouts() if c[0] == case)
    ours, ref = FNS[name]
    for _ in range(2):  # first call builds the plan, the second runs it
        y = ours(x, dim)
        assert y.shape == x.shape and y.dtype == x.dtype
        torch.testing.assert_close(y, ref(x, dim))


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_half_precision_forward(fresh_db, dtype):
    x = torch.randn(5, 70, device=DEVICE).to(dtype)
    for name, (ours, ref) in FNS.items():
        torch.testing.assert_close(ours(x), ref(x.float(), -1).to(dtype), atol=2e-2, rtol=2e-2)


@pytest.mark.parametrize("name", ["softmax", "log_softmax"])
def test_negative_bit_views_are_resolved_first(fresh_db, name):
    """torch._neg_view(t) holds t in memory but means -t: the first call and a repeated one
    (the plan path) both compute the op of -t."""
    t = torch.randn(4, 100, device=DEVICE)
    neg = torch._neg_view(t)
    assert neg.is_neg()
    ref = getattr(torch, name)(-t, -1)
    for _ in range(2):
        torch.testing.assert_close(getattr(flashtune, name)(neg, -1), ref)


def test_rows_past_the_kernels_int32_column_range_are_computed_by_torch(fresh_db, monkeypatch):
    """Rows longer than MAX_COLS (about 2**31: int32 column offsets) never reach a kernel:
    every config misfits them, and the public ops compute them with torch (forward and
    backward). Shown with the limit lowered to 64 columns."""
    from flashtune.dispatch import runtime
    from flashtune.gen.softmax_space import MAX_COLS, OPS, SoftmaxProblem, default_config, problem_misfit

    huge = SoftmaxProblem(1, MAX_COLS + 1, "float16")
    for op in OPS:
        assert "int32 column offsets" in problem_misfit(default_config(op, huge), huge)
    assert problem_misfit(default_config("softmax", SoftmaxProblem(1, MAX_COLS, "float16")),
                          SoftmaxProblem(1, MAX_COLS, "float16")) is None

    def no_kernel(*args, **kwargs):
        raise AssertionError("a kernel plan was built for a row past the column limit")

    monkeypatch.setattr(runtime, "MAX_COLS", 64)
    monkeypatch.setattr(runtime, "forward_plan", no_kernel)
    monkeypatch.setattr(runtime, "backward_plan", no_kernel)
    x = torch.randn(3, 100, device=DEVICE, requires_grad=True)
    y = flashtune.softmax(x, -1)
    torch.testing.assert_close(y, torch.softmax(x, -1))
    (g,) = torch.autograd.grad(y[:, 0].sum(), x)
    xr = x.detach().requires_grad_(True)
    (gr,) = torch.autograd.grad(torch.softmax(xr, -1)[:, 0].sum(), xr)
    torch.testing.assert_close(g, gr)


def test_result_layout_matches_fake(fresh_db):
    x = torch.randn(4, 6, 10, device=DEVICE)
    for dim in (0, 1, 2):
        assert flashtune.softmax(x, dim).stride() == output_like(x, dim).stride()


@pytest.mark.parametrize("name", FNS)
@pytest.mark.parametrize("dim", [-1, 0])
def test_fp32_gradients_match_torch(fresh_db, name, dim):
    ours, ref = FNS[name]
    x = torch.randn(5, 24, device=DEVICE, requires_grad=True)
    x_ref = x.detach().clone().requires_grad_()
    g = torch.randn(5, 24, device=DEVICE)
    ours(x, dim).backward(g)
    ref(x_ref, dim).backward(g)
    torch.testing.assert_close(x.grad, x_ref.grad, atol=1e-5, rtol=1e-4)


def test_eager_autograd_runs_the_plans_without_the_registered_ops(fresh_db):
    """Under autograd the registered ops cost far more host time than the kernels (H100, torch
    2.11: 785 us per forward + backward step of a 64 x 128 softmax, against 123 us for torch):
    eager training calls run the plans through a plain autograd.Function, forward and backward
    both on our kernels."""
    from flashtune.dispatch import RUNTIME

    for name, (ours, ref) in FNS.items():
        x = torch.randn(6, 40, device=DEVICE, requires_grad=True)
        x_ref = x.detach().clone().requires_grad_()
        y = ours(x, -1)
        assert type(y.grad_fn).__name__ == "SoftmaxFunctionBackward"
        g = torch.randn_like(y)
        y.backward(g)
        ref(x_ref, -1).backward(g)
        torch.testing.assert_close(x.grad, x_ref.grad, atol=1e-5, rtol=1e-4)
        assert RUNTIME.plans[name] and RUNTIME.backward_plans[name]


def test_fp32_double_backward_matches_torch(fresh_db):
    for name, (ours, ref) in FNS.items():
        x = torch.randn(3, 12, device=DEVICE, requires_grad=True)
        x_ref = x.detach().clone().requires_grad_()
        grads = []
        for fn, inp in ((ours, x), (ref, x_ref)):
            (g,) = torch.autograd.grad((fn(inp, -1) ** 2).sum(), inp, create_graph=True)
            (gg,) = torch.autograd.grad(g.pow(2).sum(), inp)
            grads.append((g, gg))
        torch.testing.assert_close(grads[0][0], grads[1][0], atol=1e-5, rtol=1e-4)
        torch.testing.assert_close(grads[0][1], grads[1][1], atol=1e-4, rtol=1e-3)


def test_torch_compile_fullgraph(fresh_db):
    # backend="aot_eager": traces the graph (dynamo + AOT autograd, fake tensors through our
    # register_fake, the backward through register_autograd) without inductor's C++ build,
    # which on this CPU-only box would dominate the test time.
    def f(x):
        return flashtune.softmax(x * 2.0, -1) + flashtune.log_softmax(x, 0).exp()

    def f_ref(x):
        return torch.softmax(x * 2.0, -1) + torch.log_softmax(x, 0).exp()

    compiled = torch.compile(f, fullgraph=True, backend="aot_eager")
    x = torch.randn(6, 20, device=DEVICE, requires_grad=True)
    x_ref = x.detach().clone().requires_grad_()
    out = compiled(x)
    torch.testing.assert_close(out, f_ref(x_ref))
    g = torch.randn_like(out)
    out.backward(g)
    f_ref(x_ref).backward(g)
    torch.testing.assert_close(x.grad, x_ref.grad, atol=1e-5, rtol=1e-4)
    with torch.no_grad():  # inference mode of the compiled function too
        torch.testing.assert_close(compiled(x), f_ref(x))


@pytest.mark.parametrize("op", ["softmax", "log_softmax"])
def test_opcheck_forward(fresh_db, op):
    fn = getattr(torch.ops.flashtune, op)
    for x, dim in ((torch.randn(4, 9, device=DEVICE), 1),
                   (torch.randn(3, 4, 5, device=DEVICE), 0),
                   (torch.randn(4, 9, device=DEVICE, requires_grad=True), -1)):
        torch.library.opcheck(fn, (x, dim))


@pytest.mark.parametrize("op", ["softmax", "log_softmax"])
def test_opcheck_backward(fresh_db, op):
    fn = getattr(torch.ops.flashtune, f"{op}_backward")
    y = getattr(torch, op)(torch.randn(4, 9, device=DEVICE), -1)
    torch.library.opcheck(fn, (y, torch.randn(4, 9, device=DEVICE), -1))


def test_gradcheck_float64_through_torch_fallback(fresh_db, monkeypatch):
    """CPU without the interpreter: torch computes, our autograd registration is checked."""
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    dispatch.reset()
    for fn in (flashtune.softmax, flashtune.log_softmax):
        for dim in (-1, 0):
            x = torch.randn(3, 5, dtype=torch.float64, requires_grad=True)
            assert torch.autograd.gradcheck(lambda t: fn(t, dim), (x,))
            assert torch.autograd.gradgradcheck(lambda t: fn(t, dim), (x,))


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("name", FNS)
def test_half_precision_gradients_gpu(fresh_db, dtype, name):
    ours, ref = FNS[name]
    x = torch.randn(64, 3000, device="cuda", dtype=dtype, requires_grad=True)
    x_ref = x.detach().float().requires_grad_()
    g = torch.randn(64, 3000, device="cuda", dtype=dtype)
    ours(x, -1).backward(g)
    ref(x_ref, -1).backward(g.float())
    tol = 1e-2 if dtype == torch.float16 else 3e-2
    torch.testing.assert_close(x.grad.float(), x_ref.grad, atol=tol, rtol=tol)


@pytest.mark.gpu
def test_gpu_inference_matches_torch_on_large_rows(fresh_db):
    for shape in ((8, 100_000), (300, 1000)):
        x = torch.randn(shape, device="cuda", dtype=torch.float16)
        for ours, ref in FNS.values():
            for _ in range(2):
                torch.testing.assert_close(ours(x), ref(x.float(), -1).half(), atol=2e-3, rtol=2e-2)


@pytest.mark.gpu
def test_torch_compile_inductor_gpu(fresh_db):
    """The default backend on a GPU (on CPU inductor's C++ build takes ~45 s: aot_eager above)."""
    def f(x):
        return flashtune.softmax(x.float() * 2.0, -1).to(x.dtype) + flashtune.log_softmax(x, 0)

    def f_ref(x):
        return torch.softmax(x.float() * 2.0, -1).to(x.dtype) + torch.log_softmax(x.float(), 0).to(x.dtype)

    compiled = torch.compile(f, fullgraph=True)
    x = torch.randn(64, 1000, device="cuda", dtype=torch.bfloat16, requires_grad=True)
    x_ref = x.detach().clone().requires_grad_()
    out = compiled(x)
    torch.testing.assert_close(out, f_ref(x_ref), atol=3e-2, rtol=3e-2)
    g = torch.randn_like(out)
    out.backward(g)
    f_ref(x_ref).backward(g)
    torch.testing.assert_close(x.grad.float(), x_ref.grad.float(), atol=5e-2, rtol=5e-2)


@pytest.mark.parametrize("name", ["softmax", "log_softmax"])
def test_negative_bit_gradients_are_resolved_first(fresh_db, name):
    """A gradient that is a negative-bit view (torch._neg_view(g) holds g but means -g) gives
    the gradient of -g, in eager autograd (first call and the plan path) and in double backward."""
    x = torch.randn(4, 100, device=DEVICE, requires_grad=True)
    g = torch.randn(4, 100, device=DEVICE)
    (ref,) = torch.autograd.grad(getattr(torch, name)(x, -1), x, -g)
    for create_graph in (False, False, True):
        neg = torch._neg_view(g)
        assert neg.is_neg()
        (dx,) = torch.autograd.grad(getattr(flashtune, name)(x, -1), x, neg,
                                    create_graph=create_graph)
        torch.testing.assert_close(dx, ref)


@pytest.mark.parametrize("name", ["softmax", "log_softmax"])
def test_negative_bit_saved_output_is_resolved_first(fresh_db, name):
    """The saved output y can come back a negative-bit view too: a saved_tensors_hooks pair
    (offloading, compression) may unpack it as torch._neg_view of what it packed. The backward
    kernels read memory, -y: the gradients were silently wrong (torch's are right)."""
    x = torch.randn(4, 100, device=DEVICE, requires_grad=True)
    g = torch.randn(4, 100, device=DEVICE)
    (ref,) = torch.autograd.grad(getattr(torch, name)(x, -1), x, g)
    for _ in range(2):  # first call and the plan path
        with torch.autograd.graph.saved_tensors_hooks(torch.neg, torch._neg_view):
            out = getattr(flashtune, name)(x, -1)
        (dx,) = torch.autograd.grad(out, x, g)
        torch.testing.assert_close(dx, ref)


@pytest.mark.parametrize("name", ["softmax", "log_softmax"])
def test_a_zero_tensor_gradient_gives_zeros(fresh_db, name):
    """torch's storage-less zero gradient (torch._efficientzerotensor) has no memory for a
    kernel to read: the backward gives what torch's does (zeros), not a crash."""
    x = torch.randn(3, 8, device=DEVICE, requires_grad=True)
    zero = torch._efficientzerotensor((3, 8), device=DEVICE)
    (ref,) = torch.autograd.grad(getattr(torch, name)(x, -1), x, zero)
    (dx,) = torch.autograd.grad(getattr(flashtune, name)(x, -1), x, zero)
    torch.testing.assert_close(dx, ref)
    assert not dx.isnan().any()


@pytest.mark.parametrize("name", FNS)
def test_a_zero_tensor_input_gives_torchs_result(fresh_db, name):
    """The forward's twin of the test above: a storage-less zero tensor as the input has
    data_ptr() 0 (Triton's launcher takes it as a valid null pointer) and the layout of a plain
    tensor, so it matched the plain tensor's stored plan. torch computes it, on every path."""
    ours, ref = FNS[name]
    for dim in (-1, 0):
        ours(torch.randn(3, 8, device=DEVICE), dim)  # a plan for this layout exists
        for _ in range(2):
            zero = torch._efficientzerotensor((3, 8), device=DEVICE)
            out = ours(zero, dim)
            torch.testing.assert_close(out, ref(zero, dim))
            assert not out._is_zerotensor()
    g = torch.randn(3, 8, device=DEVICE)
    grads = []
    for op in (ours, ref):  # eager autograd (flashtune.dispatch.eager_autograd)
        zero = torch._efficientzerotensor((3, 8), device=DEVICE, requires_grad=True)
        op(zero, -1).backward(g)
        grads.append(zero.grad)
    torch.testing.assert_close(grads[0], grads[1])


# --- torch features around the call, as a model uses them -------------------------------------
@pytest.mark.parametrize("name", FNS)
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float32])
def test_autocast_result_dtype(fresh_db, name, dtype):
    """README: CUDA autocast runs torch's softmax / log_softmax in float32 (its float32 list),
    ours keeps the input dtype (``dtype=torch.float32`` gives torch's); CPU autocast leaves
    torch's ops alone, and ours agrees with torch there."""
    ours, ref = FNS[name]
    x = torch.randn(4, 40, device=DEVICE).to(dtype)
    for autocast_dtype in (torch.float16, torch.bfloat16):
        with torch.autocast(DEVICE, dtype=autocast_dtype):
            out, expected = ours(x, -1), ref(x, -1)
            assert out.dtype == (x.dtype if DEVICE == "cuda" else expected.dtype)
            explicit = ours(x, -1, dtype=torch.float32)
        assert explicit.dtype == torch.float32
        torch.testing.assert_close(out.float(), expected.float(), atol=1e-2, rtol=1e-2)


@pytest.mark.parametrize("op", ["softmax", "log_softmax", "softmax_backward",
                                "log_softmax_backward"])
def test_every_regime_is_deterministic(fresh_db, op):
    """Under torch.use_deterministic_algorithms(True) (which also fills torch.empty with NaN,
    exposing a workspace read before it is written) every regime runs, splits included, and two
    runs are bitwise equal: the split partials are combined in a fixed order, not by atomics."""
    from flashtune.gen.softmax_ops import softmax_backward, softmax_forward
    from flashtune.gen.softmax_space import OPS

    from softmax_cases import make_config, semantic_knobs

    log = OPS[op].log
    x = torch.randn(3, 200, device=DEVICE)
    y = (torch.log_softmax if log else torch.softmax)(x, -1)
    dy = torch.randn_like(y)
    before = torch.are_deterministic_algorithms_enabled()
    torch.use_deterministic_algorithms(True)
    try:
        for regime in OPS[op].regimes:
            # coop: a segment of 64 of 200 columns needs 4 splits (semantic_knobs' second set
            # is 8 splits of 64); others: the first knob set
            knobs = semantic_knobs(op, regime)[2 if regime == "coop" else 0]
            config = make_config(op, regime, knobs, 200)
            if OPS[op].direction == "fwd":
                runs = [softmax_forward(x, -1, log=log, config=config) for _ in range(2)]
            else:
                runs = [softmax_backward(y, dy, -1, log=log, config=config) for _ in range(2)]
            assert torch.equal(runs[0], runs[1]), regime
            assert not runs[0].isnan().any(), regime
    finally:
        torch.use_deterministic_algorithms(before)


@pytest.mark.parametrize("name", FNS)
@pytest.mark.parametrize("reentrant", [False, True])
def test_activation_checkpoint_gradients_match_torch(fresh_db, name, reentrant):
    """torch.utils.checkpoint recomputes the forward in the backward (with grad on): the
    recomputed output must be what the first forward gave (non-reentrant checks its metadata)
    and the gradient torch's."""
    from torch.utils.checkpoint import checkpoint

    ours, ref = FNS[name]
    x = torch.randn(5, 24, device=DEVICE, requires_grad=True)
    g = torch.randn(5, 24, device=DEVICE)
    grads = []
    for fn in (ours, ref):
        x.grad = None
        checkpoint(lambda t: fn(t * 2.0, 0) * 3.0, x, use_reentrant=reentrant).backward(g)
        grads.append(x.grad)
    torch.testing.assert_close(grads[0], grads[1], atol=1e-5, rtol=1e-4)
