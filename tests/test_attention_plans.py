"""flashtune.attention's hot path: a repeated inference call runs a stored plan (config and
launch bound in), and only where every check the full path makes would pass again."""

from __future__ import annotations

import pytest
import torch

import flashtune
import flashtune.attention_op as attention_op
from flashtune.dispatch import reset
from flashtune.gen import attention_ops

from conftest import DEVICE


def _qkv(dtype=torch.float16, n=40, d=16, seed=0):
    gen = torch.Generator().manual_seed(seed)
    return [torch.randn(1, 2, n, d, generator=gen).to(DEVICE, dtype) for _ in range(3)]


def _reference(q, k, v, causal):
    scores = (q.double() @ k.double().transpose(-1, -2)) / q.shape[-1] ** 0.5
    if causal:
        n = q.shape[2]
        scores.masked_fill_(torch.ones(n, n, dtype=torch.bool, device=q.device).triu(1), float("-inf"))
    return torch.softmax(scores, -1) @ v.double()


@pytest.fixture(autouse=True)
def _fresh_plans():
    reset()
    yield
    reset()


def _refuse_full_path(monkeypatch):
    def refuse(*args, **kwargs):
        raise AssertionError("the full path ran: no plan was used")
    monkeypatch.setattr(attention_ops, "attention_forward", refuse)


@pytest.mark.parametrize("return_lse", [False, True])
def test_a_repeated_call_runs_its_plan_with_the_same_result(monkeypatch, return_lse):
    q, k, v = _qkv()
    first = flashtune.attention(q, k, v, causal=True, return_lse=return_lse)
    assert len(attention_op._PLANS) == 1
    _refuse_full_path(monkeypatch)
    again = flashtune.attention(q, k, v, causal=True, return_lse=return_lse)
    if return_lse:
        torch.testing.assert_close(again[1], first[1], rtol=0, atol=0)
        first, again = first[0], again[0]
    torch.testing.assert_close(again, first, rtol=0, atol=0)
    torch.testing.assert_close(again.double(), _reference(q, k, v, True), rtol=0, atol=2e-3)
    # new data in the same layout: still the plan, still right
    q2, k2, v2 = _qkv(seed=1)
    out = flashtune.attention(q2, k2, v2, causal=True, return_lse=return_lse)
    out = out[0] if return_lse else out
    torch.testing.assert_close(out.double(), _reference(q2, k2, v2, True), rtol=0, atol=2e-3)


def test_an_int_scale_runs_a_plan_too(monkeypatch):
    """scale=1 (an int) never got a plan: every such call took the registered op's full path
    (about 220 us of host time against 37 us on an H100)."""
    q, k, v = _qkv()
    first = flashtune.attention(q, k, v, scale=1)
    assert len(attention_op._PLANS) == 1
    _refuse_full_path(monkeypatch)
    torch.testing.assert_close(flashtune.attention(q, k, v, scale=1), first, rtol=0, atol=0)
    torch.testing.assert_close(flashtune.attention(q, k, v, scale=1.0), first, rtol=0, atol=0)
    with pytest.raises(AssertionError, match="full path"):  # another value: not this plan
        flashtune.attention(q, k, v, scale=2)


def test_a_plan_never_skips_a_check_that_would_fail(monkeypatch):
    """The key holds dtypes, devices, shapes, strides, flags and pointer alignment: a call that
    differs in any of them takes the full path, with its checks."""
    q, k, v = _qkv()
    flashtune.attention(q, k, v)
    with pytest.raises(TypeError, match="dtype"):
        flashtune.attention(q, k.to(torch.bfloat16), v)
    with pytest.raises(ValueError):
        flashtune.attention(q, k[..., :8], v)  # head dims differ
    with pytest.raises(TypeError):
        flashtune.attention(q, k, v, causal=1)  # not a bool
    with pytest.raises(TypeError):
        flashtune.attention(q, k, v, return_lse="yes")
    # a base pointer 2 bytes off a 16-byte boundary: a key of its own, and a right result
    flat = torch.empty(q.numel() + 1, dtype=q.dtype, device=q.device)
    shifted = flat[1:].view(q.shape).copy_(q)
    assert shifted.data_ptr() % 16 != q.data_ptr() % 16
    torch.testing.assert_close(flashtune.attention(shifted, k, v), flashtune.attention(q, k, v))
    assert len(attention_op._PLANS) == 2
    # another scale is another plan, and it is applied
    scaled = flashtune.attention(q, k, v, scale=0.5)
    assert not torch.equal(scaled, flashtune.attention(q, k, v))
    assert len(attention_op._PLANS) == 3


def test_autograd_custom_choosers_and_reset_bypass_plans(monkeypatch):
    q, k, v = _qkv()
    flashtune.attention(q, k, v)
    # a call that needs autograd goes through the op: its backward still refuses
    qg = q.clone().requires_grad_(True)
    with pytest.raises(NotImplementedError, match="no backward"):
        flashtune.attention(qg, k, v).sum().backward()
    # a user's chooser is asked even where a plan exists
    asked = []

    def chooser(op, problem, device):
        asked.append(problem)
        return attention_ops.default_config(op, problem)

    attention_op.set_config_chooser(chooser)
    try:
        flashtune.attention(q, k, v)
    finally:
        attention_op.set_config_chooser(None)
    assert len(asked) == 1
    # reset() forgets the plans (a new database or FLASHTUNE_* setting must take effect)
    assert attention_op._PLANS
    reset()
    assert not attention_op._PLANS


def test_empty_problems_answer_without_a_plan():
    q, k, v = _qkv()
    out = flashtune.attention(q, k[:, :, :0], v[:, :, :0])
    assert torch.equal(out, torch.zeros_like(q))
    assert not attention_op._PLANS


def test_negative_views_and_meta_tensors_keep_the_op_path():
    """A negative-bit view (torch._neg_view) holds -k in memory: the op resolves it, a direct
    launch would read +k. Meta tensors (shape inference) get the op's fake result."""
    q, k, v = _qkv()
    flashtune.attention(q, k, v)  # a plan for this layout exists ...
    neg = torch._neg_view(k)
    assert neg.is_neg()
    expected = flashtune.attention(q, neg.resolve_neg(), v)
    for _ in range(2):  # ... and neither the first nor a repeated call may use one
        torch.testing.assert_close(flashtune.attention(q, neg, v), expected, rtol=0, atol=0)
    meta = [torch.empty(1, 2, 40, 16, dtype=torch.float16, device="meta") for _ in range(3)]
    out = flashtune.attention(*meta)
    assert out.device.type == "meta" and out.shape == (1, 2, 40, 16)
