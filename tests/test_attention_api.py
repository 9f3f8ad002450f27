"""flashtune.attention: the public function, its torch.library op, bad inputs, empty inputs."""

from __future__ import annotations

import pytest
import torch

import flashtune
from attention_cases import Shape, check_case, config, make_qkv
from flashtune import attention_op
from flashtune.gen import attention_ops
from flashtune.gen.space import ConfigError


def _qkv(device, dtype=torch.float16, nq=24, nk=24, d=32, h=2, hkv=2, b=1):
    return make_qkv(Shape(b, h, hkv, nq, nk, d), dtype, device)


def test_public_attention_matches_reference(device):
    q, k, v = _qkv(device, nq=40, nk=56)
    out = flashtune.attention(q, k, v, causal=True)
    assert isinstance(out, torch.Tensor) and out.shape == q.shape
    out2, lse = flashtune.attention(q, k, v, causal=True, return_lse=True)
    assert torch.equal(out, out2)
    assert check_case(out2, lse, q, k, v, True) is None


def test_no_lse_buffer_unless_asked(device):
    # The kernel writes lse only with return_lse: a first call (no stored plan) must not
    # allocate the (B, H, Nq) float32 buffer for nothing, as the stored plans do not.
    from torch.utils._python_dispatch import TorchDispatchMode

    class LseAllocations(TorchDispatchMode):
        count = 0

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            result = func(*args, **(kwargs or {}))
            if (isinstance(result, torch.Tensor) and result.dtype == torch.float32
                    and tuple(result.shape) == (1, 2, 40)):
                LseAllocations.count += 1
            return result

    q, k, v = _qkv(device, nq=40, nk=56)
    with LseAllocations():
        out = attention_ops.attention_forward(q, k, v, causal=True)
    assert LseAllocations.count == 0
    with LseAllocations():
        out2, lse = attention_ops.attention_forward(q, k, v, causal=True, return_lse=True)
    assert LseAllocations.count >= 1
    assert torch.equal(out, out2) and check_case(out2, lse, q, k, v, True) is None


def test_registered_op_and_fake_implementation(device):
    q, k, v = _qkv(device)
    op = torch.ops.flashtune.attention_fwd.default
    out, lse = op(q, k, v, False, 0.125, True)
    assert lse.shape == (1, 2, 24)
    out, lse = op(q, k, v, False, 0.125, False)
    assert lse.shape == (0,)
    torch.library.opcheck(op, (q, k, v, True, 0.2, True),
                          test_utils=("test_schema", "test_faketensor"))
    from torch._subclasses.fake_tensor import FakeTensorMode

    with FakeTensorMode() as mode:
        fq, fk, fv = (mode.from_tensor(t) for t in (q, k, v))
        fout, flse = op(fq, fk, fv, True, 0.1, True)
        assert fout.shape == q.shape and fout.dtype == q.dtype
        assert flse.shape == q.shape[:3] and flse.dtype == torch.float32


def test_backward_raises_not_implemented(device):
    q, k, v = _qkv(device)
    q.requires_grad_(True)
    out = flashtune.attention(q, k, v)
    assert out.requires_grad  # so a backward cannot silently skip q
    with pytest.raises(NotImplementedError, match="no backward"):
        out.float().sum().backward()


def test_chooser_hook_is_used_and_reset(device):
    q, k, v = _qkv(device)
    seen = []

    def choose(op, problem, dev):
        seen.append((op, problem))
        return config(BLOCK_M=16, BLOCK_N=16, exp2=False)

    attention_op.set_config_chooser(choose)
    try:
        out = flashtune.attention(q, k, v)
    finally:
        attention_op.set_config_chooser(None)
    assert seen and seen[0][0] == "attention_fwd"
    problem = seen[0][1]
    assert (problem.batch, problem.heads, problem.nq, problem.nk, problem.head_dim,
            problem.causal, problem.dtype) == (1, 2, 24, 24, 32, False, "float16")
    assert check_case(out, None, q, k, v, False) is None
    with pytest.raises(TypeError, match="chooser"):
        attention_op.set_config_chooser(42)


# A valid config of the space that cannot run these problems (head dim 32): 128 x 128 tiles
# on one warp need more registers per thread than the space's resource bound allows.
_TOO_BIG = dict(BLOCK_M=128, BLOCK_N=128, num_warps=1)


def test_chosen_config_that_cannot_run_falls_back_with_warning(device):
    """A stored config that cannot run the problem must not crash a model: warn and fall back."""
    q, k, v = _qkv(device, dtype=torch.bfloat16)
    with pytest.warns(RuntimeWarning, match="cannot run.*values per thread"):
        out = attention_ops.attention_forward(q, k, v, choose=lambda *a: config(**_TOO_BIG))
    assert check_case(out, None, q, k, v, False) is None


def test_explicit_config_that_cannot_run_raises(device):
    q, k, v = _qkv(device, dtype=torch.bfloat16)
    with pytest.raises(ConfigError, match="values per thread"):
        attention_ops.attention_forward(q, k, v, config=config(**_TOO_BIG))
    # out of the space (an old tune's fp16 P.V accumulator): named as such
    with pytest.raises(ConfigError, match=r"pv_acc='fp16' is outside the space \['fp32'\]"):
        attention_ops.attention_forward(q, k, v, config=config(pv_acc="fp16"))
    with pytest.raises(ConfigError, match="BLOCK_M"):
        attention_ops.attention_forward(q, k, v, config=config(BLOCK_M=24))


def test_tma_needs_aligned_strides(device):
    if "tma" not in attention_ops.triton_features():
        pytest.skip("this Triton has no tensor descriptors")
    q, k, v = _qkv(device, d=32)
    q_odd = torch.randn(1, 2, 24, 33, dtype=torch.float16, device=device)[..., 1:]  # misaligned
    with pytest.raises(ConfigError, match="tma"):
        attention_ops.attention_forward(q_odd, k, v, config=config(BLOCK_M=16, BLOCK_N=16, tma=True))
    with pytest.warns(RuntimeWarning, match="tma"):
        out = attention_ops.attention_forward(
            q_odd, k, v, choose=lambda *a: config(BLOCK_M=16, BLOCK_N=16, tma=True))
    assert check_case(out, None, q_odd, k, v, False) is None


# --- empty inputs ------------------------------------------------------------------------------

def test_empty_query_gives_empty_output(device):
    q, k, v = _qkv(device, nq=0)
    out, lse = flashtune.attention(q, k, v, causal=True, return_lse=True)
    assert out.shape == (1, 2, 0, 32) and lse.shape == (1, 2, 0)
    q, k, v = _qkv(device, b=0)
    assert flashtune.attention(q, k, v).shape == (0, 2, 24, 32)


def test_no_keys_gives_zeros_like_sdpa(device):
    q, k, v = _qkv(device, nk=0)
    out, lse = flashtune.attention(q, k, v, return_lse=True)
    expected = torch.nn.functional.scaled_dot_product_attention(q.float(), k.float(), v.float())
    assert torch.equal(out.float(), expected) and not out.abs().any()
    assert torch.isneginf(lse).all()


# --- bad inputs: each names the argument ---------------------------------------------------------

def test_not_a_tensor(device):
    q, k, v = _qkv(device)
    with pytest.raises(TypeError, match="k must be a torch.Tensor"):
        flashtune.attention(q, k.tolist(), v)


def test_not_4d(device):
    q, k, v = _qkv(device)
    with pytest.raises(ValueError, match="q must be 4-D"):
        flashtune.attention(q[0], k, v)
    with pytest.raises(ValueError, match="v must be 4-D"):
        flashtune.attention(q, k, v.unsqueeze(0))


@pytest.mark.parametrize("dtype", [torch.float32, torch.int32, torch.int8, torch.float64])
def test_unsupported_dtypes(device, dtype):
    q, k, v = _qkv(device)
    with pytest.raises(TypeError, match="q has dtype"):
        flashtune.attention(q.to(dtype), k.to(dtype), v.to(dtype))


def test_mismatched_dtypes(device):
    q, k, v = _qkv(device)
    with pytest.raises(TypeError, match="v has dtype torch.bfloat16 but q has torch.float16"):
        flashtune.attention(q, k, v.to(torch.bfloat16))


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_autocast_casts_inputs_as_sdpa(device, dtype):
    """Under torch.autocast, SDPA casts its floating inputs (fp64 aside) to the autocast dtype;
    fp32 q/k/v used to be refused here. Outside autocast they still are."""
    q, k, v = (t.float() for t in _qkv(device, nq=40, nk=56))
    expected, expected_lse = flashtune.attention(q.to(dtype), k.to(dtype), v.to(dtype),
                                                 causal=True, return_lse=True)
    other = torch.bfloat16 if dtype == torch.float16 else torch.float16
    with torch.autocast(device_type=q.device.type, dtype=dtype):
        for _ in range(2):  # the second call finds the first's stored plan
            out, lse = flashtune.attention(q, k, v, causal=True, return_lse=True)
            assert out.dtype == dtype
            assert torch.equal(out, expected) and torch.equal(lse, expected_lse)
            # a half input of the other dtype is cast too, as autocast does
            out = flashtune.attention(q.to(other), k, v.to(other), causal=True)
            with torch.autocast(device_type=q.device.type, enabled=False):
                twice = flashtune.attention(q.to(other).to(dtype), k.to(dtype),
                                            v.to(other).to(dtype), causal=True)
            assert out.dtype == dtype and torch.equal(out, twice)
        with pytest.raises(TypeError, match="q has dtype torch.float64"):  # autocast skips fp64
            flashtune.attention(q.double(), k.double(), v.double())
        with torch.autocast(device_type=q.device.type, enabled=False):
            with pytest.raises(TypeError, match="q has dtype torch.float32"):
                flashtune.attention(q, k, v)
    with pytest.raises(TypeError, match="q has dtype torch.float32"):
        flashtune.attention(q, k, v)
    assert flashtune.attention(q.to(other), k.to(other), v.to(other)).dtype == other


def test_autocast_leaves_meta_inputs_alone(device):
    """Meta tensors (shape inference) under torch.autocast: autocast has no meta device type,
    so SDPA leaves them as they are; asking torch.is_autocast_enabled("meta") raised a
    RuntimeError ('unknown device type for autocast') from every such call."""
    q, k, v = (t.to("meta") for t in _qkv(device))
    with torch.autocast(device_type=device, dtype=torch.bfloat16):
        out = flashtune.attention(q, k, v)
        expected = torch.nn.functional.scaled_dot_product_attention(q, k, v)
    assert out.device.type == "meta" and out.shape == q.shape and out.dtype == expected.dtype


def test_autocast_makes_no_cast_calls_for_inputs_already_cast(device):
    """Hot path: under torch.autocast, q/k/v already in the autocast dtype (the usual case:
    they come from layers autocast ran) need no cast. Each no-op Tensor.to call cost about
    1 us of host time on every attention call (3 of them, several times the call budget)."""
    from torch.overrides import TorchFunctionMode

    class CountCasts(TorchFunctionMode):
        casts = 0

        def __torch_function__(self, func, types, args=(), kwargs=None):
            if func is torch.Tensor.to:
                CountCasts.casts += 1
            return func(*args, **(kwargs or {}))

    q, k, v = _qkv(device)
    expected = flashtune.attention(q, k, v)
    with torch.autocast(device_type=q.device.type, dtype=q.dtype):
        flashtune.attention(q, k, v)  # stores the plan
        with CountCasts():
            out = flashtune.attention(q, k, v)
    assert CountCasts.casts == 0 and torch.equal(out, expected)


def test_mismatched_devices(device):
    q, k, v = _qkv(device)
    with pytest.raises(ValueError, match="k is on meta"):
        flashtune.attention(q, k.to("meta"), v)


def test_mismatched_head_dims(device):
    q, k, v = _qkv(device)
    with pytest.raises(ValueError, match="k has head dim 16 but q has head dim 32"):
        flashtune.attention(q, k[..., :16], v)
    with pytest.raises(ValueError, match="v has head dim"):
        flashtune.attention(q, k, v[..., :16])


def test_mismatched_batch_heads_lengths(device):
    q, k, v = _qkv(device, b=2)
    with pytest.raises(ValueError, match="k has batch 1 but q has batch 2"):
        flashtune.attention(q, k[:1], v)
    q, k, v = _qkv(device, h=3, hkv=3)
    with pytest.raises(ValueError, match="not a multiple"):
        flashtune.attention(q, k[:, :2], v[:, :2])
    with pytest.raises(ValueError, match="v has 2 heads but k has 3"):
        flashtune.attention(q, k, v[:, :2])
    with pytest.raises(ValueError, match="v has sequence length 10 but k has 24"):
        flashtune.attention(q, k, v[:, :, :10])


@pytest.mark.parametrize("dim", [4, 12, 264, 512])
def test_unsupported_head_dims(device, dim):
    q, k, v = _qkv(device, d=8)
    q, k, v = (torch.zeros(*t.shape[:3], dim, dtype=t.dtype, device=t.device) for t in (q, k, v))
    with pytest.raises(ValueError, match=f"head dim {dim}"):
        flashtune.attention(q, k, v)


def test_bad_flags(device):
    q, k, v = _qkv(device)
    with pytest.raises(TypeError, match="causal must be a bool"):
        flashtune.attention(q, k, v, causal=1)
    with pytest.raises(TypeError, match="return_lse must be a bool"):
        flashtune.attention(q, k, v, return_lse="yes")
    with pytest.raises(TypeError, match="scale must be a real number"):
        flashtune.attention(q, k, v, scale="0.1")
    with pytest.raises(TypeError, match="scale must be a real number"):
        flashtune.attention(q, k, v, scale=True)
    with pytest.raises(ValueError, match="scale must be finite"):
        flashtune.attention(q, k, v, scale=float("nan"))


@pytest.mark.skipif(torch.cuda.is_available(), reason="CPU-only check")
def test_cpu_tensors_without_interpreter_are_refused(monkeypatch):
    q, k, v = _qkv("cpu")
    monkeypatch.setenv("TRITON_INTERPRET", "0")
    with pytest.raises(ValueError, match="q is on cpu"):
        attention_ops.attention_forward(q, k, v)


def test_fx_symbolic_trace_records_one_attention_node(device):
    """torch.fx.symbolic_trace of a model calling flashtune.attention raised TypeError ("q must
    be a torch.Tensor, got Proxy") where SDPA traces. The call is now one graph node, and the
    traced module computes what the model does: scale's default, causal and the lse included."""
    class Model(torch.nn.Module):
        def forward(self, q, k, v):
            out, lse = flashtune.attention(q, k, v, causal=True, return_lse=True)
            return out * 2, lse, flashtune.attention(q, k, v, scale=0.25)

    traced = torch.fx.symbolic_trace(Model())
    calls = [n for n in traced.graph.nodes if n.op == "call_function"
             and getattr(n.target, "__name__", "") == "_attention_node"]
    assert len(calls) == 2
    q, k, v = (torch.randn(1, 2, 40, 16, device=device, dtype=torch.float16) for _ in range(3))
    got, want = traced(q, k, v), Model()(q, k, v)
    for a, b in zip(got, want):
        torch.testing.assert_close(a, b, rtol=0, atol=0)
    ref = torch.nn.functional.scaled_dot_product_attention(q.double(), k.double(), v.double(),
                                                           scale=0.25)
    torch.testing.assert_close(got[2].double(), ref, rtol=0, atol=2e-3)


# flashtune imported before torch: flashtune.attention_op is imported at the first access to
# flashtune.attention, here inside the trace.
_TRACE_FIRST_ACCESS = """
import sys
import flashtune
import torch

class Model(torch.nn.Module):
    def forward(self, q, k, v):
        return flashtune.attention(q, k, v, causal=True)

traced = torch.fx.symbolic_trace(Model())
q, k, v = (torch.randn(1, 2, 40, 16, dtype=torch.float16, device=sys.argv[1]) for _ in range(3))
torch.testing.assert_close(traced(q, k, v), Model()(q, k, v), rtol=0, atol=0)
print("ok")
"""


def test_fx_symbolic_trace_at_the_first_access_to_attention(tmp_path, device):
    """The node was a torch.fx.wrap leaf, which a trace patches only if it was registered
    before the trace began: with `import flashtune` before `import torch` (isort's order), the
    first access to flashtune.attention inside the trace imported it too late, and the
    unpatched leaf called attention, which called the leaf: RecursionError."""
    import os
    import subprocess
    import sys

    # On this run's device: the interpreter on CPU tensors, or the GPU.
    env = dict(os.environ, TRITON_INTERPRET="1" if device == "cpu" else "0",
               FLASHTUNE_CACHE_DIR=str(tmp_path), FLASHTUNE_DB=str(tmp_path / "none.sqlite"))
    done = subprocess.run([sys.executable, "-c", _TRACE_FIRST_ACCESS, device], capture_output=True,
                          text=True, env=env, timeout=300)
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr[-2000:]
