"""Every kernel launch of every template passes enable_fp_fusion=True.

Triton 3.9 warns on each first compile that its FP-fusion default turns off in 3.10 (a
UserWarning: under ``-W error`` the warning itself is raised from the user's first call), and
3.10 would compile our kernels without FMAs: slower, and with the rounding the attention
kernel's FOLD_SCALE path was not measured with. The templates therefore ask for fusion at
each launch. Checked two ways: on the rendered source of one config per code path of every
op (each ``kernel[grid](...)`` call), and on the launches a run makes (interpreted on the CPU; compiled on a GPU, where it also
shows that the installed Triton takes the option).
"""

from __future__ import annotations

import ast

import pytest
import torch
import triton.runtime.interpreter as interpreter
from triton.runtime.jit import JITFunction

from conftest import DEVICE

from flashtune.gen import render_variant, run_variant
from flashtune.gen.registry import OPS, op_spec

# Tunables that only change sizes, not which kernels a module launches or how.
_SIZES = {"block", "rows_per_program", "splits", "num_warps", "num_stages", "BLOCK_M", "BLOCK_N"}


def _one_config_per_code_path(op: str) -> list:
    """The first config of the space for each combination of its structural tunables."""
    seen = {}
    for config in op_spec(op).space.exhaustive():
        key = tuple((k, bool(v) if k in ("programs_per_sm", "resident") else v)
                    for k, v in config.items() if k not in _SIZES)
        seen.setdefault(key, config)
    return list(seen.values())


def _launches(source: str) -> list[ast.Call]:
    """Every ``name[grid](...)`` call in the module's source."""
    return [node for node in ast.walk(ast.parse(source))
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Subscript)]


def _fusion_keyword(call: ast.Call):
    for kw in call.keywords:
        if kw.arg == "enable_fp_fusion":
            return ast.unparse(kw.value)
    return None


@pytest.mark.parametrize("op", sorted(OPS))
def test_every_rendered_launch_asks_for_fp_fusion(op):
    configs = _one_config_per_code_path(op)
    assert configs
    checked = 0
    for config in configs:
        source = render_variant(op, config).source
        calls = _launches(source)
        assert calls, f"{op} {dict(config)}: no kernel launch found in the rendered source"
        for call in calls:
            assert _fusion_keyword(call) == "True", (
                f"{op} {dict(config)}: launch {ast.unparse(call.func)} does not pass "
                f"enable_fp_fusion=True")
            checked += 1
    assert checked >= len(configs)


@pytest.fixture
def launch_options(monkeypatch):
    """The keyword options of every kernel launch made while the test runs (interpreted on
    the CPU, compiled on a GPU)."""
    seen = []

    def spy_on(cls):
        original = cls.run

        def spy(self, *args, grid, warmup, **kwargs):
            seen.append(kwargs)
            return original(self, *args, grid=grid, warmup=warmup, **kwargs)

        monkeypatch.setattr(cls, "run", spy)

    spy_on(interpreter.InterpretedFunction)
    spy_on(JITFunction)
    return seen


@pytest.mark.parametrize("op, config", [
    ("softmax", dict(regime="row", block=64, rows_per_program=2)),
    ("softmax", dict(regime="online", block=16)),
    ("log_softmax", dict(regime="split", block=16, splits=2)),
    ("softmax", dict(regime="split", block=16, splits=2, fused=True)),
    ("softmax_backward", dict(regime="split", block=16, splits=2)),
])
def test_softmax_launches_ask_for_fp_fusion(launch_options, op, config):
    config = op_spec(op).space.complete({**config, "num_warps": 1})
    x = torch.randn(3, 40, device=DEVICE)
    out = torch.empty_like(x)
    if op.endswith("_backward"):
        run_variant(op, config, torch.softmax(x, -1), torch.randn_like(x), out)
    else:
        run_variant(op, config, x, out)
    assert launch_options, "no kernel launch was seen"
    assert all(kw.get("enable_fp_fusion") is True for kw in launch_options), launch_options
