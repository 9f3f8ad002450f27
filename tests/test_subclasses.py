"""Tensor subclasses: flashtune.softmax / log_softmax give what torch's ops give for them.

A subclass call goes through torch.ops.flashtune.*, which reaches the subclass's
__torch_dispatch__ (or __torch_function__). A subclass that unwraps any op runs our kernel on
its inner tensor; one that knows only aten ops refuses ours, and torch's op computes the call.
"""

from __future__ import annotations

import warnings

import pytest
import torch
from torch.utils._pytree import tree_map

import flashtune
from flashtune.dispatch import DispatchWarning

from conftest import DEVICE

PAIRS = {"softmax": (flashtune.softmax, torch.softmax),
         "log_softmax": (flashtune.log_softmax, torch.log_softmax)}


class Wrapper(torch.Tensor):
    """A wrapper subclass that runs any op on its inner tensor and wraps the result."""

    @staticmethod
    def __new__(cls, inner):
        return torch.Tensor._make_wrapper_subclass(
            cls, inner.shape, strides=inner.stride(), dtype=inner.dtype, device=inner.device,
            requires_grad=inner.requires_grad)

    def __init__(self, inner):
        self.inner = inner

    @classmethod
    def handles(cls, func) -> bool:
        return True

    @classmethod
    def __torch_dispatch__(cls, func, types, args=(), kwargs=None):
        if not cls.handles(func):
            return NotImplemented
        unwrap = lambda a: a.inner if isinstance(a, Wrapper) else a  # noqa: E731
        out = func(*tree_map(unwrap, args), **tree_map(unwrap, kwargs or {}))
        return tree_map(lambda a: cls(a) if isinstance(a, torch.Tensor) else a, out)


class AtenOnly(Wrapper):
    """Knows aten ops only: anything else is NotImplemented (as torch.masked.MaskedTensor)."""

    @classmethod
    def handles(cls, func) -> bool:
        return func.namespace == "aten"


class AtenOnlyRaising(Wrapper):
    """Knows aten ops only and raises for others (the pattern of many quantized subclasses)."""

    @classmethod
    def handles(cls, func) -> bool:
        if func.namespace != "aten":
            raise NotImplementedError(f"{cls.__name__} does not implement {func}")
        return True


@pytest.mark.parametrize("name", PAIRS)
def test_unwrapping_subclass_runs_our_op(name):
    ours, ref = PAIRS[name]
    x = torch.randn(5, 12, device=DEVICE)
    with warnings.catch_warnings():
        warnings.simplefilter("error", DispatchWarning)
        y = ours(Wrapper(x), -1)
    assert type(y) is Wrapper
    torch.testing.assert_close(y.inner, ref(x, -1))


@pytest.mark.parametrize("cls", [AtenOnly, AtenOnlyRaising])
@pytest.mark.parametrize("name", PAIRS)
def test_aten_only_subclass_gets_torchs_result(name, cls):
    """A subclass that handles only aten ops refused torch.ops.flashtune.softmax ("Multiple
    dispatch failed ... all __torch_dispatch__ handlers returned NotImplemented", or its own
    NotImplementedError) where torch.softmax works: torch's op computes it, said once."""
    ours, ref = PAIRS[name]
    x = torch.randn(5, 12, device=DEVICE)
    g = torch.randn(5, 12, device=DEVICE)
    xs = cls(x.clone().requires_grad_())
    with pytest.warns(DispatchWarning, match=cls.__qualname__):
        y = ours(xs, 1)
    assert type(y) is cls
    torch.testing.assert_close(y.inner, ref(x, 1))
    y.backward(cls(g))
    xr = x.clone().requires_grad_()
    ref(xr, 1).backward(g)
    torch.testing.assert_close(xs.grad.inner, xr.grad)
    with warnings.catch_warnings():
        warnings.simplefilter("error", DispatchWarning)  # once per subclass
        torch.testing.assert_close(ours(cls(x), 0).inner, ref(x, 0))


@pytest.mark.parametrize("name", PAIRS)
def test_masked_tensor_matches_torch(name):
    """MaskedTensor returns NotImplemented for ops it does not know: our op raised a TypeError
    where torch.softmax works. (torch 2.13's MaskedTensor has no log_softmax: ours raises
    torch's own error for it.)"""
    masked = pytest.importorskip("torch.masked")
    ours, ref = PAIRS[name]
    x = torch.randn(4, 9, device=DEVICE)
    mask = torch.rand(4, 9, device=DEVICE) > 0.3
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # MaskedTensor's "prototype" notices
        warnings.simplefilter("ignore", DispatchWarning)  # ours: torch's op computes it
        try:
            expected = ref(masked.masked_tensor(x, mask), -1)
        except Exception as err:  # noqa: BLE001 - whatever torch raises, ours must raise too
            warnings.simplefilter("error", DispatchWarning)  # and say no word of a fallback
            with pytest.raises(type(err), match=r"aten\._log_softmax"):  # torch's op
                ours(masked.masked_tensor(x, mask), -1)
            return
        got = ours(masked.masked_tensor(x, mask), -1)
    assert type(got) is type(expected)
    assert torch.equal(got.get_mask(), expected.get_mask())
    torch.testing.assert_close(got.get_data()[mask], expected.get_data()[mask])


@pytest.mark.parametrize("name", PAIRS)
def test_aten_only_subclass_under_compile(name):
    """dynamo cannot trace a subclass without __tensor_flatten__: the graph breaks and the call
    runs eagerly, with the branch taken at trace time. That branch sent every compiled call
    straight to our op, which the subclass refused (TypeError), where compiled torch.softmax
    works."""
    ours, ref = PAIRS[name]
    x = torch.randn(3, 7, device=DEVICE)
    torch._dynamo.reset()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DispatchWarning)
        y = torch.compile(lambda t: ours(t, -1))(AtenOnly(x))
    assert type(y) is AtenOnly
    torch.testing.assert_close(y.inner, ref(x, -1))


class TraceableAtenOnly(AtenOnly):
    """AtenOnly that dynamo can trace (it has __tensor_flatten__), as a quantized wrapper may."""

    def __tensor_flatten__(self):
        return ["inner"], None

    @staticmethod
    def __tensor_unflatten__(inner_tensors, meta, outer_size, outer_stride):
        return TraceableAtenOnly(inner_tensors["inner"])

    def __repr__(self):  # torch's error message prints it (the default repr fails on it)
        return f"TraceableAtenOnly({self.inner!r})"


@pytest.mark.parametrize("fullgraph", [False, True])
def test_traceable_aten_only_subclass_under_compile_fails_as_readme_says(fullgraph):
    """README said the graph breaks without fullgraph and torch's op computes the call: dynamo
    runs our op on the fake subclass while tracing, the refusal comes there, and no graph break
    follows, fullgraph or not. Eagerly, torch's op computes it."""
    x = torch.randn(3, 7, device=DEVICE)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DispatchWarning)
        torch.testing.assert_close(flashtune.softmax(TraceableAtenOnly(x), -1).inner,
                                   torch.softmax(x, -1))
    torch._dynamo.reset()
    with pytest.raises(Exception, match="returned NotImplemented"):
        torch.compile(lambda t: flashtune.softmax(t, -1), fullgraph=fullgraph)(
            TraceableAtenOnly(x))


class AtenOnlyMode(torch.utils._python_dispatch.TorchDispatchMode):
    """A dispatch mode that knows aten ops only (a tracer or checker of a user's own)."""

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if func.namespace != "aten":
            raise NotImplementedError(f"{func} unsupported")
        return func(*args, **(kwargs or {}))


@pytest.mark.parametrize("name", PAIRS)
def test_aten_only_dispatch_mode_gets_torchs_result(name, monkeypatch):
    """Under a torch dispatch mode that knows only aten ops, our op raised NotImplementedError
    where torch.softmax works; torch's op computes it now, said once per mode and op."""
    from flashtune import once

    monkeypatch.setattr(once, "_said", {})  # the notice is once per process
    ours, ref = PAIRS[name]
    x = torch.randn(5, 12, device=DEVICE)
    expected = ref(x, -1)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with AtenOnlyMode():
            first, second = ours(x, -1), ours(x, 0)
    said = [str(w.message) for w in caught if issubclass(w.category, DispatchWarning)]
    assert len(said) == 1 and "torch dispatch mode" in said[0] and "AtenOnlyMode" in said[0], said
    # said at the user's call (stacklevel through flashtune.once), not inside flashtune
    assert [w.filename for w in caught if issubclass(w.category, DispatchWarning)] == [__file__]
    torch.testing.assert_close(first, expected)
    torch.testing.assert_close(second, ref(x, 0))
