"""The templates' static asserts: the project rule is that a template's header lists every
constraint and that those on the kernels' constexprs are repeated as tl.static_assert.

Each kernel a module launches must assert them on every constexpr it takes (checked on the
rendered source), the asserts must pass for every config the space accepts (representative
configs rendered and run), and a config that breaks one, rendered past validation, must fail
when the kernel is traced, naming the constraint. In Triton's interpreter a failed
tl.static_assert is an AssertionError when the kernel runs (InterpreterError); compiled, a
CompileTimeAssertionFailure: both carry the assert's message.
"""

from __future__ import annotations

import ast
import contextlib
import re

import pytest
import torch
from triton.runtime.errors import OutOfResources, PTXASError

from attention_cases import Shape, check_case, config, make_qkv
from flashtune.gen import loader, render
from flashtune.gen.attention_ops import attention_forward
from flashtune.gen.registry import op_spec
from flashtune.gen.softmax_space import (MAX_CHUNK, MAX_SEGMENT, MAX_TILE, MIN_LOOP_BLOCK, OPS)
from flashtune.gen.space import _MAKE_TOKEN, Config


def _unvalidated_module(op: str, raw: dict):
    """The loaded module of ``raw`` (completed with the space's defaults), rendered without
    validation: what a template does with a config the space would refuse."""
    spec = op_spec(op)
    items = {p.name: p.default for p in spec.space.params}
    items.update(raw)
    config = Config(spec.space.name, items.items(), _MAKE_TOKEN)
    return loader.load(render.render(spec.template(config), op, config, spec.render_context()))


def _kernel_asserts(source: str, names) -> dict[str, tuple[set, set]]:
    """{function: (its constexpr parameters, the conditions of its tl.static_asserts)} for the
    functions of the module that ``names(name)`` accepts."""
    found = {}
    for node in ast.parse(source).body:
        if not (isinstance(node, ast.FunctionDef) and names(node.name)):
            continue
        constexprs = {a.arg for a in node.args.args
                      if a.annotation is not None and "constexpr" in ast.unparse(a.annotation)}
        conditions = {ast.unparse(call.args[0]) for call in ast.walk(node)
                      if isinstance(call, ast.Call) and ast.unparse(call.func) == "tl.static_assert"}
        found[node.name] = (constexprs, conditions)
    return found


def _missing(kernels: dict, wanted: dict) -> list[str]:
    missing = []
    for name, (constexprs, conditions) in kernels.items():
        for param in sorted(constexprs & wanted.keys()):
            for condition in wanted[param]:
                if ast.unparse(ast.parse(condition)) not in conditions:
                    missing.append(f"{name} takes {param} but does not assert {condition}")
    return missing


def _pow2(name: str) -> str:
    return f"({name} & ({name} - 1)) == 0"


# ---------------------------------------------------------------------------------------------
# softmax

# One config per code path that changes which kernels and constexprs the module has.
_SOFTMAX_SHAPES = {
    "row": dict(regime="row", block=8, rows_per_program=64, num_stages=1, num_warps=2),
    "online": dict(regime="online", block=1024, num_stages=2),
    "online-resident": dict(regime="online", block=1024, num_stages=2, resident=4096),
    "online-align": dict(regime="online", block=16, num_stages=2, align=True, num_warps=1),
    "split": dict(regime="split", block=1024, splits=4, num_stages=2),
    "split-fused": dict(regime="split", block=1024, splits=4, num_stages=2, fused=True),
    "split-persistent-paired": dict(regime="split", block=1024, splits=4, num_stages=1,
                                    fused=True, programs_per_sm=4, paired_loads=True),
    "coop": dict(regime="coop", block=4096, splits=4, num_stages=1),
}


@pytest.mark.parametrize("op", sorted(OPS))
@pytest.mark.parametrize("shape", _SOFTMAX_SHAPES)
def test_every_softmax_kernel_asserts_the_constraints_on_its_constexprs(op, shape):
    """Each kernel a module launches (its name starts with the kernel name; helpers get only
    what the kernels pass them) asserts the header's constraints on each constexpr it takes."""
    space = OPS[op].space
    raw = {k: v for k, v in _SOFTMAX_SHAPES[shape].items() if k in space.names}
    regime = raw["regime"]
    if regime not in OPS[op].regimes:
        pytest.skip("not a regime of this op")
    from flashtune.gen import render_variant

    source = render_variant(op, space.complete(raw)).source
    kernels = _kernel_asserts(source, lambda name: name.startswith(f"_{op}_{regime}"))
    assert kernels
    block = [_pow2("BLOCK")] + (
        [f"BLOCK * ROWS <= {MAX_TILE}"] if regime == "row" else
        [f"BLOCK >= {MIN_LOOP_BLOCK}", f"BLOCK <= {MAX_SEGMENT if regime == 'coop' else MAX_CHUNK}"])
    wanted = {"BLOCK": block, "ROWS": [_pow2("ROWS")], "GRAIN": [_pow2("GRAIN")],
              "SPLITS": [_pow2("SPLITS"), "SPLITS >= 2"],
              "RESIDENT": [_pow2("RESIDENT"), "RESIDENT <= 32768"]}
    assert not _missing(kernels, wanted)


@pytest.mark.parametrize("op,raw,message", [
    ("softmax_backward", dict(regime="split", block=64, splits=3, num_stages=2),
     "SPLITS must be a power of two"),
    ("log_softmax", dict(regime="split", block=64, splits=6, num_stages=2, fused=True),
     "SPLITS must be a power of two"),
    ("softmax", dict(regime="online", block=8, num_stages=2), "BLOCK must be >= 16"),
    ("softmax", dict(regime="coop", block=128, splits=1, num_stages=1), "SPLITS must be >= 2"),
], ids=["bwd-split-splits3", "fused-split-splits6", "online-block8", "coop-splits1"])
def test_a_softmax_config_outside_the_space_fails_its_static_assert(op, raw, message, device):
    module = _unvalidated_module(op, raw)
    x = torch.randn(2, 100, device=device)
    tensors = (x, torch.empty_like(x)) if OPS[op].direction == "fwd" else (
        x.softmax(-1), torch.randn_like(x), torch.empty_like(x))
    with pytest.raises(Exception, match=message):
        module.launch(*tensors)


# ---------------------------------------------------------------------------------------------
# attention

_ATTENTION_WANTED = {
    "BLOCK_M": [_pow2("BLOCK_M"), "BLOCK_M >= 16", "BLOCK_M <= 256"],
    "BLOCK_N": [_pow2("BLOCK_N"), "BLOCK_N >= 16", "BLOCK_N <= 256"],
    "BLOCK_D": [_pow2("BLOCK_D"), "BLOCK_D >= 16", "BLOCK_D >= HEAD_DIM"],
    "HEAD_DIM": ["HEAD_DIM % 8 == 0", "HEAD_DIM >= 8", "HEAD_DIM <= 256"],
    "EVEN_D": ["EVEN_D == (HEAD_DIM == BLOCK_D)"],
}


@pytest.mark.parametrize("knobs", [{}, {"persistent": True}, {"tma": True, "persistent": True}],
                         ids=str)
def test_the_attention_tile_asserts_the_constraints_on_its_constexprs(knobs):
    """Every attention kernel runs _attn_tile, which asserts the header's constraints. No
    dtype is asserted: every config of the space runs fp16 and bf16 alike."""
    from flashtune.gen import render_variant

    source = render_variant("attention_fwd", config(**knobs)).source
    kernels = _kernel_asserts(source, lambda name: name == "_attn_tile")
    assert not _missing(kernels, _ATTENTION_WANTED)
    assert not any("dtype" in condition for condition in kernels["_attn_tile"][1])
    header = source.split("import math")[0]
    for words in ("BLOCK_M, BLOCK_N powers of two in [16, 256]", "multiple of 8",
                  "BLOCK_D a power of two >= 16 and >= HEAD_DIM"):
        assert words in " ".join(header.replace("#", " ").split())


# Extremes of the space: the smallest and largest tiles, head dims at both ends and padded,
# both grids and both exp forms.
_VALID_ATTENTION = [
    (dict(BLOCK_M=16, BLOCK_N=16), Shape(1, 2, 1, 20, 33, 8), torch.float16),
    (dict(BLOCK_M=256, BLOCK_N=256, num_warps=16, exp2=False), Shape(1, 1, 1, 40, 300, 16),
     torch.bfloat16),
    (dict(BLOCK_M=256, BLOCK_N=16, num_warps=8, persistent=True),
     Shape(1, 2, 2, 30, 20, 72), torch.float16),
    (dict(BLOCK_M=16, BLOCK_N=256, persistent=True, exp2=False), Shape(2, 1, 1, 17, 40, 120),
     torch.bfloat16),
    (dict(BLOCK_M=32, BLOCK_N=32, num_warps=2), Shape(1, 1, 1, 40, 70, 256),
     torch.float16),
]


@pytest.mark.parametrize("knobs,shape,dtype", _VALID_ATTENTION,
                         ids=[f"{k}-{s}" for k, s, _ in _VALID_ATTENTION])
def test_attention_configs_of_the_space_pass_their_static_asserts(knobs, shape, dtype, device):
    q, k, v = make_qkv(shape, dtype, device)
    for causal in (False, True):
        try:
            out, lse = attention_forward(q, k, v, causal, None, True, config=config(**knobs))
        except (PTXASError, OutOfResources):
            # Compiled: the front end, asserts included, has passed; ptxas or the launch then
            # refuses a tile too large for this GPU (256 x 256 on an H100), which the tuner
            # counts as a failed trial. The interpreter runs every config here.
            assert device == "cuda"
            continue
        assert check_case(out, lse, q, k, v, causal) is None


@contextlib.contextmanager
def _fails_naming(message: str):
    """The block raises, and the message is on its exception chain: compiled, a failed assert
    in a @triton.jit function that the kernel calls (_attn_tile) surfaces as a CompilationError
    at the call site, with the assert's own message on the chain of causes below it."""
    with pytest.raises(Exception) as info:
        yield
    texts, error = [], info.value
    while error is not None and len(texts) < 16:
        texts.append(str(error))
        error = error.__cause__ or error.__context__
    assert any(re.search(message, text) for text in texts), texts


def _attention_inputs(device, dtype=torch.float16, head_dim=64):
    q, k, v = make_qkv(Shape(1, 1, 1, 32, 32, head_dim), dtype, device)
    return q, k, v, torch.empty_like(q), None, head_dim ** -0.5, False


@pytest.mark.parametrize("knobs,message", [
    (dict(BLOCK_M=8), "BLOCK_M must be >= 16"),
    (dict(BLOCK_N=48), "BLOCK_N must be a power of two"),
    (dict(BLOCK_N=512, persistent=True), "BLOCK_N must be <= 256"),
], ids=["BLOCK_M8", "BLOCK_N48", "BLOCK_N512-persistent"])
def test_an_attention_config_outside_the_space_fails_its_static_assert(knobs, message, device):
    module = _unvalidated_module("attention_fwd", config(**knobs))
    with _fails_naming(message):
        module.launch(*_attention_inputs(device))


def test_attention_launch_facts_outside_the_rules_fail_their_static_asserts(device, monkeypatch):
    """What attention_ops checks before a launch, asserted by the kernel too: a BLOCK_D
    narrower than the head dim."""
    module = _unvalidated_module("attention_fwd", config(BLOCK_M=32))
    monkeypatch.setattr(module, "_block_d", lambda head_dim: 32)
    with _fails_naming("BLOCK_D must be >= HEAD_DIM"):
        module.launch(*_attention_inputs(device))


_SOFTMAX_COLUMNS = {"row": 7, "online": 1000, "online-resident": 5000, "online-align": 37,
                    "split": 3000, "split-fused": 3000, "split-persistent-paired": 4000,
                    "coop": 5000}


@pytest.mark.parametrize("op", sorted(OPS))
@pytest.mark.parametrize("shape", _SOFTMAX_SHAPES)
def test_softmax_configs_of_the_space_pass_their_static_asserts(op, shape, device):
    from flashtune.gen import run_variant

    space = OPS[op].space
    raw = {k: v for k, v in _SOFTMAX_SHAPES[shape].items() if k in space.names}
    if raw["regime"] not in OPS[op].regimes:
        pytest.skip("not a regime of this op")
    x = torch.randn(3, _SOFTMAX_COLUMNS[shape], device=device)
    log = OPS[op].log
    y = torch.log_softmax(x, -1) if log else torch.softmax(x, -1)
    out = torch.empty_like(x)
    if OPS[op].direction == "fwd":
        run_variant(op, space.complete(raw), x, out)
        torch.testing.assert_close(out, y)
    else:
        dy = torch.randn_like(x)
        dx = dy - y.exp() * dy.sum(-1, keepdim=True) if log else y * (
            dy - (dy * y).sum(-1, keepdim=True))
        run_variant(op, space.complete(raw), y, dy, out)
        torch.testing.assert_close(out, dx)
