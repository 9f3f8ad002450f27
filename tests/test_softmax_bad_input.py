"""Bad input: each case gets a clear error or the torch-matching result."""

from __future__ import annotations

import pytest
import torch

from flashtune.gen import ConfigError
from flashtune.gen.softmax_ops import DimError, softmax_backward, softmax_forward


@pytest.mark.parametrize("dtype", [torch.int32, torch.int64, torch.bool, torch.float64])
def test_unsupported_dtype_is_type_error(dtype, device):
    x = torch.ones(3, 4, dtype=dtype, device=device)
    with pytest.raises(TypeError, match="x has dtype"):
        softmax_forward(x)


@pytest.mark.parametrize("op", ["softmax", "log_softmax"])
def test_public_op_dtype_error_names_the_op_called(op, device):
    # It said "flashtune softmax takes ..." to a log_softmax caller too.
    import flashtune

    with pytest.raises(TypeError, match=f"input has dtype torch.int64; .*{op}"):
        getattr(flashtune, op)(torch.arange(4, device=device))


@pytest.mark.parametrize("op", ["softmax", "log_softmax"])
def test_public_op_dtype_argument_error_names_both_ops(op, device):
    # The dtype= error said "flashtune softmax computes in ..." to a log_softmax caller too
    # (the input's dtype error was fixed, this one left).
    import flashtune

    with pytest.raises(TypeError, match=r"dtype=torch.int32 is not supported; .*log_softmax"):
        getattr(flashtune, op)(torch.randn(4, device=device), -1, dtype=torch.int32)


def test_not_a_tensor():
    with pytest.raises(TypeError, match="x must be a torch.Tensor"):
        softmax_forward([1.0, 2.0])


@pytest.mark.parametrize("shape", [(0, 5), (5, 0), (0,), (2, 0, 3)])
@pytest.mark.parametrize("log", [False, True])
def test_empty_tensors_match_torch(shape, log, device):
    x = torch.empty(shape, device=device)
    out = softmax_forward(x, -1, log=log)
    expected = (torch.log_softmax if log else torch.softmax)(x, -1)
    assert out.shape == expected.shape and out.dtype == expected.dtype


@pytest.mark.parametrize("log", [False, True])
def test_zero_dim_tensor_matches_torch(log, device):
    x = torch.tensor(2.5, device=device)
    for dim in (0, -1):
        out = softmax_forward(x, dim, log=log)
        expected = (torch.log_softmax if log else torch.softmax)(x.cpu(), dim)
        assert out.shape == () and torch.equal(out.cpu(), expected)


@pytest.mark.parametrize("dim", [2, -3, 5])
def test_out_of_range_dim(dim, device):
    x = torch.randn(3, 4, device=device)
    with pytest.raises(DimError, match="dim=") as info:
        softmax_forward(x, dim)
    assert isinstance(info.value, ValueError) and isinstance(info.value, IndexError)


def test_dim_must_be_int(device):
    with pytest.raises(TypeError, match="dim must be an int"):
        softmax_forward(torch.randn(3, 4, device=device), 1.0)


def test_mismatched_devices_in_backward(device):
    y = torch.softmax(torch.randn(3, 4), -1).to(device)
    dy = torch.randn(3, 4, device="meta")
    with pytest.raises(ValueError, match="one device"):
        softmax_backward(y, dy)


def test_mismatched_shapes_and_dtypes_in_backward(device):
    y = torch.softmax(torch.randn(3, 4), -1).to(device)
    with pytest.raises(ValueError, match="one shape"):
        softmax_backward(y, torch.randn(3, 5, device=device))
    with pytest.raises(TypeError, match="one dtype"):
        softmax_backward(y, torch.randn(3, 4, device=device, dtype=torch.float16))


def test_cpu_tensor_without_interpreter_is_clear(monkeypatch):
    monkeypatch.setenv("TRITON_INTERPRET", "0")
    with pytest.raises(ValueError, match="CUDA tensor"):
        softmax_forward(torch.randn(3, 4))


def test_config_that_cannot_hold_the_row(device):
    config = {"regime": "row", "block": 16, "rows_per_program": 1, "splits": 1, "num_warps": 1,
              "num_stages": 1, "lane_stats": False, "l2_hint": False, "exp2": True, "max_pass": False, "resident": 0,
              "align": False, "fused": False, "programs_per_sm": 0, "paired_loads": False, "vector_stats": False}
    with pytest.raises(ConfigError, match="cannot hold 100 columns"):
        softmax_forward(torch.randn(2, 100, device=device), config=config)


def test_tampered_config_never_reaches_renderer(device):
    config = {"regime": "row", "block": "64; import os", "rows_per_program": 1, "splits": 1,
              "num_warps": 1, "num_stages": 1, "lane_stats": False, "l2_hint": False,
              "exp2": True, "max_pass": False, "resident": 0, "align": False,
              "fused": False, "programs_per_sm": 0, "paired_loads": False, "vector_stats": False}
    with pytest.raises(ConfigError, match="block must be of type int"):
        softmax_forward(torch.randn(2, 10, device=device), config=config)
