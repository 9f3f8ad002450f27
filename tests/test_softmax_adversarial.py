"""Adversarial inputs to the public softmax ops: odd shapes and layouts, dim and dtype spellings
torch accepts, torch.func transforms, and (GPU only) row counts past 2**31.

Each test compares with torch on the same input; on CPU the kernels run in Triton's interpreter.
"""

from __future__ import annotations

import contextlib

import numpy as np
import pytest
import torch

import flashtune
import flashtune.dispatch.library  # noqa: F401 - registers torch.ops.flashtune.*
from flashtune.gen import render_variant
from flashtune.gen.softmax_space import OPS

from dispatch_helpers import DEVICE, fresh_db  # noqa: F401

pytestmark = [pytest.mark.filterwarnings("ignore::RuntimeWarning:triton"),
              pytest.mark.filterwarnings("ignore::flashtune.cache.CacheWarning")]

PAIRS = {"softmax": (flashtune.softmax, torch.softmax),
         "log_softmax": (flashtune.log_softmax, torch.log_softmax)}


def _check(name, x, dim, *, atol=1e-5, rtol=1e-4):
    ours, ref = PAIRS[name]
    expected = ref(x, dim)
    for _ in range(2):  # the first call builds the plan, the second runs it
        out = ours(x, dim)
        assert out.shape == x.shape and out.dtype == x.dtype
        torch.testing.assert_close(out, expected, atol=atol, rtol=rtol, equal_nan=True)


# --- shapes and layouts -----------------------------------------------------------------------
@pytest.mark.parametrize("name", PAIRS)
@pytest.mark.parametrize("width", [1, 2, 3, 15, 16, 17, 1023, 1025, 16385])
def test_widths_around_block_sizes(fresh_db, name, width):
    _check(name, torch.randn(3, width, device=DEVICE), -1)


def _layouts():
    base = torch.randn(40, device=DEVICE)
    yield "one column", torch.randn(9, 1, device=DEVICE), -1
    yield "one column dim0", torch.randn(9, 1, device=DEVICE), 0
    yield "one row dim0", torch.randn(1, 9, device=DEVICE), 0
    yield "4d dim1", torch.randn(2, 3, 4, 5, device=DEVICE), 1
    yield "4d dim-2", torch.randn(2, 3, 4, 5, device=DEVICE), -2
    yield "channels_last dim1", torch.randn(2, 3, 4, 5, device=DEVICE).to(
        memory_format=torch.channels_last), 1
    yield "channels_last dim-1", torch.randn(2, 3, 4, 5, device=DEVICE).to(
        memory_format=torch.channels_last), -1
    yield "stepped slice", torch.randn(8, 20, device=DEVICE)[::2, ::3], -1
    yield "stepped slice dim0", torch.randn(8, 20, device=DEVICE)[::2, ::3], 0
    yield "expanded rows (stride 0)", torch.randn(1, 8, device=DEVICE).expand(4, 8), -1
    yield "expanded columns (stride 0)", torch.randn(4, 1, device=DEVICE).expand(4, 8), -1
    yield "overlapping as_strided", base.as_strided((5, 8), (4, 1)), -1
    yield "overlapping as_strided dim0", base.as_strided((5, 8), (4, 1)), 0
    yield "storage offset", base[3:].view(37, 1).expand(37, 3)[1:], 0
    yield "zero rows", torch.randn(0, 5, device=DEVICE), -1
    yield "zero reduced axis", torch.randn(5, 0, device=DEVICE), -1
    yield "zero middle dim", torch.randn(3, 0, 4, device=DEVICE), 0
    yield "0-d", torch.tensor(2.0, device=DEVICE), 0
    yield "inf and nan rows", torch.tensor([[float("-inf")] * 4, [0.0, float("-inf"), 1, 2],
                                            [float("inf"), 0, 0, 0], [float("nan"), 0, 0, 0]],
                                           device=DEVICE), -1


@pytest.mark.parametrize("name", PAIRS)
@pytest.mark.parametrize("case", list(_layouts()), ids=lambda c: c[0])
def test_odd_layouts_match_torch(fresh_db, name, case):
    _, x, dim = case
    _check(name, x, dim)


@pytest.mark.parametrize("shape,strides", [((4, 1, 8), (8, 99, 1)), ((1, 8), (99, 1))])
def test_size_one_dims_with_odd_strides_give_the_fake_layout(fresh_db, shape, strides):
    """is_contiguous() ignores the stride of a size-1 dim; the result must still have the
    layout the fake (meta) implementation promises torch.compile."""
    from flashtune.dispatch.plans import output_like

    x = torch.randn(32, device=DEVICE).as_strided(shape, strides)
    assert x.is_contiguous()
    for _ in range(2):
        out = flashtune.softmax(x, -1)
        assert out.stride() == output_like(x, x.dim() - 1).stride()
        torch.testing.assert_close(out, torch.softmax(x, -1))


def test_row_kernels_index_rows_in_int64_before_multiplying():
    """program_id * ROWS is int32 in Triton: past 2**31 rows it wrapped to negative rows that
    the row mask admitted (out-of-bounds reads and writes). The GPU test below runs it."""
    for op in OPS:
        config = OPS[op].space.complete(dict(regime="row", block=16, rows_per_program=64,
                                             splits=1, num_warps=1, num_stages=1))
        source = render_variant(op, config).source
        assert "tl.program_id(0).to(tl.int64) * ROWS" in source, op


# --- dim and dtype spellings ------------------------------------------------------------------
@pytest.mark.parametrize("dim", [np.int64(0), np.int32(-1), torch.tensor(1)],
                         ids=["np.int64", "np.int32", "0-d tensor"])
def test_dim_accepts_what_torch_accepts(fresh_db, dim):
    x = torch.randn(4, 6, device=DEVICE)
    torch.testing.assert_close(flashtune.softmax(x, dim), torch.softmax(x, dim))
    torch.testing.assert_close(flashtune.log_softmax(x, dim), torch.log_softmax(x, dim))


@pytest.mark.parametrize("dim", [True, 1.0, None, "1", np.bool_(True), torch.tensor(True),
                                 torch.tensor([1]), torch.tensor(1.0), np.array(1),
                                 np.array(-1, dtype=np.int32)])
def test_dim_rejects_what_torch_rejects(fresh_db, dim):
    """A 0-d integer ndarray has __index__, but torch's dim refuses every ndarray."""
    x = torch.randn(4, 6, device=DEVICE)
    with pytest.raises((TypeError, RuntimeError)):  # torch 2.11 names None/"1" a RuntimeError
        torch.softmax(x, dim)
    with pytest.raises(TypeError, match="dim must be an int"):
        flashtune.softmax(x, dim)
    with pytest.raises(TypeError, match="dim must be an int"):
        flashtune.log_softmax(x, dim=dim)


@pytest.mark.parametrize("name", PAIRS)
def test_numpy_dim_made_inside_torch_compile_traces(fresh_db, name):
    """torch.compile sees a numpy integer made inside the compiled code as a 0-d ndarray over a
    traced tensor: its __index__ (which eager calls use) broke the graph, so fullgraph failed
    where torch.softmax traces. The graph must hold our op, with the dim as a constant."""
    ours, ref = PAIRS[name]
    x = torch.randn(4, 6, device=DEVICE)
    graphs = []

    def backend(gm, inputs):
        graphs.append(str(gm.code))
        return gm

    for make_dim, expected_dim in ((lambda t: np.int64(-1), -1), (lambda t: np.int32(0), 0),
                                   (lambda t: np.int64(t.dim() - 1), 1)):
        torch._dynamo.reset()
        fn = torch.compile(lambda t: ours(t, make_dim(t)), fullgraph=True, backend=backend)
        torch.testing.assert_close(fn(x), ref(x, expected_dim))
        assert f"flashtune.{name}" in graphs[-1]
    torch._dynamo.reset()
    with pytest.raises(Exception, match="dim must be an int, got ndarray"):
        torch.compile(lambda t: ours(t, np.float32(1)), fullgraph=True, backend="eager")(x)


@pytest.mark.parametrize("name", PAIRS)
@pytest.mark.parametrize("src,dtype", [(torch.float32, torch.float64), (torch.float32, torch.float16),
                                       (torch.float16, torch.float32), (torch.int64, torch.float32),
                                       (torch.bool, torch.float64)])
def test_dtype_argument_casts_first_like_torch(fresh_db, name, src, dtype):
    ours, ref = PAIRS[name]
    x = (torch.randn(3, 10, device=DEVICE) * 4).to(src)
    expected = ref(x, 1, dtype=dtype)
    out = ours(x, 1, dtype=dtype)
    assert out.dtype == dtype
    torch.testing.assert_close(out, expected, atol=2e-3, rtol=2e-3)
    torch.testing.assert_close(ours(x, 1, dtype), expected, atol=2e-3, rtol=2e-3)  # positional


@pytest.mark.parametrize("dtype", [torch.int32, torch.complex64, "float32", torch.float32.itemsize])
def test_dtype_argument_rejects_non_floating(fresh_db, dtype):
    with pytest.raises(TypeError, match="dtype"):
        flashtune.softmax(torch.randn(3, 4, device=DEVICE), -1, dtype=dtype)


def test_dtype_argument_gradient_reaches_the_input_dtype(fresh_db):
    x = torch.randn(3, 9, device=DEVICE, dtype=torch.float16, requires_grad=True)
    g = torch.randn(3, 9, device=DEVICE, dtype=torch.float64)
    flashtune.log_softmax(x, -1, dtype=torch.float64).backward(g)
    x_ref = x.detach().clone().requires_grad_()
    torch.log_softmax(x_ref, -1, dtype=torch.float64).backward(g)
    assert x.grad.dtype == torch.float16
    torch.testing.assert_close(x.grad, x_ref.grad)


@pytest.mark.parametrize("dtype", [torch.int64, torch.bool, torch.complex64])
def test_non_floating_input_without_dtype_is_a_type_error(fresh_db, dtype):
    with pytest.raises(TypeError, match="dtype"):
        flashtune.softmax(torch.zeros(3, 4, device=DEVICE).to(dtype), -1)


def test_compile_fullgraph_dynamic_with_dtype_argument(fresh_db):
    fn = torch.compile(lambda x: flashtune.softmax(x, -1, dtype=torch.float64) * 2,
                       fullgraph=True, dynamic=True, backend="eager")
    for shape in ((3, 5), (4, 7), (2, 3, 9)):
        x = torch.randn(shape, device=DEVICE)
        torch.testing.assert_close(fn(x), torch.softmax(x, -1, dtype=torch.float64) * 2)


# --- torch.func transforms --------------------------------------------------------------------
@pytest.mark.parametrize("name", PAIRS)
@pytest.mark.parametrize("in_dim,dim", [(0, -1), (0, 0), (1, 0), (2, 1)])
def test_vmap_matches_torch(fresh_db, name, in_dim, dim):
    ours, ref = PAIRS[name]
    x = torch.randn(3, 4, 5, device=DEVICE)
    ours(x.movedim(in_dim, 0)[0], dim)  # a plan for the per-sample layout exists: not used
    got = torch.func.vmap(lambda t: ours(t, dim), in_dims=in_dim)(x)
    expected = torch.func.vmap(lambda t: ref(t, dim), in_dims=in_dim)(x)
    torch.testing.assert_close(got, expected)


@pytest.mark.parametrize("name", PAIRS)
def test_vmap_inside_torch_compile_uses_our_op(fresh_db, name):
    """Under torch.compile the call is traced as torch.ops.flashtune.*, whose vmap rule makes the
    batch dim more rows (no per-sample loop, no switch to torch's op)."""
    ours, ref = PAIRS[name]
    x = torch.randn(3, 4, 5, device=DEVICE)
    compiled = torch.compile(lambda t: torch.func.vmap(lambda r: ours(r, -1))(t),
                             fullgraph=True, backend="aot_eager")
    with _no_vmap_fallback():
        torch.testing.assert_close(compiled(x), ref(x, -1))


@pytest.mark.parametrize("name", PAIRS)
def test_func_grad_jacrev_hessian_match_torch(fresh_db, name):
    ours, ref = PAIRS[name]
    x = torch.randn(6, device=DEVICE, dtype=torch.float64)
    c = torch.randn(6, device=DEVICE, dtype=torch.float64)
    for transform in (torch.func.grad, torch.func.hessian):
        got = transform(lambda t: (ours(t, 0) * c).sum())(x)
        expected = transform(lambda t: (ref(t, 0) * c).sum())(x)
        torch.testing.assert_close(got, expected)
    x32 = x.float()
    torch.testing.assert_close(torch.func.jacrev(lambda t: ours(t, 0))(x32),
                               torch.func.jacrev(lambda t: ref(t, 0))(x32))
    batch = torch.randn(4, 6, device=DEVICE)
    torch.testing.assert_close(
        torch.func.vmap(torch.func.grad(lambda t: (ours(t, 0) * c.float()).sum()))(batch),
        torch.func.vmap(torch.func.grad(lambda t: (ref(t, 0) * c.float()).sum()))(batch))


@pytest.mark.parametrize("name", PAIRS)
@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_func_grad_and_jacrev_inside_torch_compile_match_torch(fresh_db, name, backend):
    """Defect: under torch.compile every call was traced as torch.ops.flashtune.*, also inside
    torch.func.grad / jacrev, where torch's custom ops cannot run (their generated
    autograd.Function has no setup_context; pytorch#168393): compiling a function that takes
    torch.func.grad of a flashtune softmax raised 'In order to use an autograd.Function with
    functorch transforms ...'. Eager calls already switch to torch's op there."""
    ours, ref = PAIRS[name]
    x = torch.randn(3, 6, device=DEVICE)
    c = torch.randn(3, 6, device=DEVICE)
    try:
        for transform in (torch.func.grad, torch.func.jacrev):
            got = torch.compile(transform(lambda t: (ours(t, 0) * c).sum()), backend=backend)(x)
            expected = transform(lambda t: (ref(t, 0) * c).sum())(x)
            torch.testing.assert_close(got, expected)
        per_row = torch.func.vmap(torch.func.grad(lambda t: (ours(t, 0) * c[0]).sum()))
        torch.testing.assert_close(
            torch.compile(per_row, backend=backend)(x),
            torch.func.vmap(torch.func.grad(lambda t: (ref(t, 0) * c[0]).sum()))(x))
    finally:
        torch._dynamo.reset()


@pytest.mark.parametrize("name", PAIRS)
def test_func_jvp_and_jacfwd_match_torch(fresh_db, name):
    ours, ref = PAIRS[name]
    x = torch.randn(2, 6, device=DEVICE)
    t = torch.randn(2, 6, device=DEVICE)  # not constant along rows: softmax's tangent is not 0
    ours(x, 1)
    got = torch.func.jvp(lambda a: ours(a, 1), (x,), (t,))
    expected = torch.func.jvp(lambda a: ref(a, 1), (x,), (t,))
    assert got[1].abs().max() > 1e-3
    torch.testing.assert_close(got, expected)
    torch.testing.assert_close(torch.func.jacfwd(lambda a: ours(a, 0))(x[0]),
                               torch.func.jacfwd(lambda a: ref(a, 0))(x[0]))


def test_functionalize_matches_torch(fresh_db):
    x = torch.randn(3, 5, device=DEVICE)
    flashtune.softmax(x, -1)
    got = torch.func.functionalize(lambda t: flashtune.softmax(t, -1))(x)
    torch.testing.assert_close(got, torch.softmax(x, -1))


def test_jit_trace_records_the_op(fresh_db):
    """A direct kernel launch is invisible to torch.jit.trace: the trace would replay the
    first input's result as a constant. Even with plans for the traced layouts in place."""
    x = torch.randn(3, 5, device=DEVICE)
    flashtune.softmax(x, -1)
    flashtune.log_softmax(x, 0)
    traced = torch.jit.trace(lambda t: flashtune.softmax(t, -1) + flashtune.log_softmax(t, 0), (x,))
    for shape in ((3, 5), (4, 7)):
        other = torch.randn(shape, device=DEVICE)
        torch.testing.assert_close(traced(other),
                                   torch.softmax(other, -1) + torch.log_softmax(other, 0))


@pytest.mark.parametrize("name", PAIRS)
def test_jit_trace_of_a_module_passes_its_own_check(fresh_db, name):
    """torch.jit.trace(model, x) of a module with parameters: the trace runs with grad on (the
    softmax input requires grad), and its default check (check_trace=True) traces again under
    torch.no_grad() and compares the graphs. There the softmax input took the hot path, whose
    x.shape the tracer records (a dead size node) and names the value after the hot path's
    local variable: the graphs differed (%8 vs %x) and every such trace raised
    TracingCheckError."""
    ours, ref = PAIRS[name]

    class Model(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.proj = torch.nn.Linear(16, 16, device=DEVICE)

        def forward(self, a):
            return ours(self.proj(a), 0)

    model = Model()
    traced = torch.jit.trace(model, torch.randn(3, 16, device=DEVICE))
    x = torch.randn(5, 16, device=DEVICE)
    torch.testing.assert_close(traced(x), ref(model.proj(x), 0))


@pytest.mark.parametrize("op", ["softmax", "log_softmax"])
def test_library_ops_have_a_vmap_rule(fresh_db, op):
    """torch.ops.flashtune.* under vmap (e.g. vmap inside torch.compile): batch dim as rows."""
    fn, ref = getattr(torch.ops.flashtune, op), getattr(torch, op)
    x = torch.randn(3, 4, 5, device=DEVICE)
    with _no_vmap_fallback():  # torch's per-sample loop would also be right, but slow
        torch.testing.assert_close(torch.func.vmap(lambda t: fn(t, 1), in_dims=2)(x),
                                   ref(x, 1).movedim(2, 0))
        torch.testing.assert_close(torch.func.vmap(torch.func.vmap(lambda t: fn(t, 0)))(x),
                                   ref(x, 2))
        scalar = torch.func.vmap(lambda t: fn(t, -1))(torch.randn(3, device=DEVICE))
        torch.testing.assert_close(scalar, ref(torch.zeros(3, 1, device=DEVICE), 1).squeeze(1))
    back = getattr(torch.ops.flashtune, f"{op}_backward")
    aten = (torch.ops.aten._log_softmax_backward_data if op == "log_softmax"
            else torch.ops.aten._softmax_backward_data)
    y = ref(x, -1)
    dy = torch.randn(3, 4, 5, device=DEVICE)
    with _no_vmap_fallback():
        torch.testing.assert_close(torch.func.vmap(lambda a, b: back(a, b, 0))(y, dy),
                                   aten(dy, y, 1, y.dtype), atol=1e-6, rtol=1e-5)
        torch.testing.assert_close(torch.func.vmap(lambda b: back(y[0], b, -1))(dy),
                                   aten(dy, y[0].expand(3, 4, 5), 2, y.dtype), atol=1e-6, rtol=1e-5)


@contextlib.contextmanager
def _no_vmap_fallback():
    """An op without a batching rule raises instead of looping (and printing a warning)."""
    functorch = torch._C._functorch
    if not hasattr(functorch, "_set_vmap_fallback_enabled"):
        yield
        return
    before = functorch._is_vmap_fallback_enabled()
    functorch._set_vmap_fallback_enabled(False)
    try:
        yield
    finally:
        functorch._set_vmap_fallback_enabled(before)


# --- GPU only -----------------------------------------------------------------------------------
@pytest.mark.gpu
@pytest.mark.parametrize("regime", ["row", "online", "split", "coop"])
def test_more_rows_than_grid_axis_1_allows_gpu(fresh_db, regime):
    """Rows ride grid axis 0 (limit 2**31 - 1), never axes 1/2 (limit 65535)."""
    from flashtune.gen.softmax_ops import softmax_forward

    config = {"row": dict(regime="row", block=64, rows_per_program=1, num_warps=1),
              "online": dict(regime="online", block=16, num_warps=1, num_stages=2),
              "split": dict(regime="split", block=16, splits=2, num_warps=1, num_stages=2),
              "coop": dict(regime="coop", block=32, splits=2, num_warps=1)}[regime]
    x = torch.randn(70_000, 40, device="cuda")
    for log in (False, True):
        out = softmax_forward(x, -1, log=log, config=OPS["softmax"].space.complete(config))
        torch.testing.assert_close(out, (torch.log_softmax if log else torch.softmax)(x, -1))


@pytest.mark.gpu
def test_more_than_2_31_rows_gpu(fresh_db):
    """2**31 + 64 rows of 2 columns (fp16, about 8.6 GB each for x, y, dy, dx)."""
    n_rows = 2**31 + 64
    free, _ = torch.cuda.mem_get_info()
    if free < 4 * n_rows * 2 * 2 + (2 << 30):
        pytest.skip("needs about 36 GB of free GPU memory")
    from flashtune.dispatch.runtime import RUNTIME

    x = torch.empty(n_rows, 2, device="cuda", dtype=torch.float16)
    x[:, 0] = 0.0
    x[:, 1] = 1.0
    x[-64:, 1] = -1.0  # the rows the old int32 index wrapped on differ from the rest
    y = flashtune.softmax(x, -1)
    expected = torch.softmax(x[-128:].float(), -1).half()
    torch.testing.assert_close(y[-128:], expected)
    torch.testing.assert_close(y[:64], torch.softmax(x[:64].float(), -1).half())
    del x
    dy = torch.ones_like(y)
    dy[:, 1] = 0.0
    dx = RUNTIME.backward(y, dy, 1, False)
    ref = torch.ops.aten._softmax_backward_data(dy[-128:].float(), y[-128:].float(), 1, torch.float32)
    torch.testing.assert_close(dx[-128:], ref.half(), atol=1e-3, rtol=1e-3)
