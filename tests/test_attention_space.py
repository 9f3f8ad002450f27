"""The attention variant space: validation, defaults, the EXHAUSTIVE set, buckets, rendering."""

from __future__ import annotations

import dataclasses

import pytest
import torch

from flashtune.gen import ConfigError, render_variant, template_family_hash, validate_config
from flashtune.gen.attention_space import (
    OPS,
    SPACE,
    AttentionProblem,
    default_config,
    fitting_configs,
    hopper_features,
    problem_bucket,
    problem_misfit,
)
from flashtune.gen.registry import OPS as ALL_OPS
from flashtune.gen.registry import TEMPLATE_FAMILIES

BENCH = [  # (B, H, N, D) of the benchmark set
    (32, 32, 1024, 64), (8, 32, 4096, 64), (2, 32, 16384, 64),
    (32, 16, 1024, 128), (8, 16, 4096, 128), (2, 16, 16384, 128),
    (2, 16, 4096, 256), (4, 32, 1000, 128),
]


def _problem(b=1, h=2, nq=128, nk=128, d=64, causal=False, dtype="float16", hkv=None):
    return AttentionProblem(b, h, hkv or h, nq, nk, d, causal, dtype)


def test_registered():
    assert "attention_fwd" in ALL_OPS and ALL_OPS["attention_fwd"] is OPS["attention_fwd"]
    assert set(TEMPLATE_FAMILIES["attention_fwd"]) == {
        "_attention_common.py.jinja", "attention_fwd.py.jinja", "attention_fwd_persistent.py.jinja"}
    assert len(template_family_hash("attention_fwd")) == 16


def test_validate_rejects_bad_stored_configs():
    good = SPACE.complete({}).as_dict()
    assert validate_config("attention_fwd", good)["BLOCK_M"] == 128
    for bad in ({**good, "BLOCK_M": True}, {**good, "BLOCK_M": "64"}, {**good, "BLOCK_N": 48},
                {**good, "pv_acc": "fp8"}, {**good, "tma": 1}, {**good, "extra": 1},
                {**good, "pv_acc": "fp16"},  # an old tune's: left the space (adversarial tests)
                {k: v for k, v in good.items() if k != "exp2"},
                {**good, "BLOCK_M": 16, "num_warps": 4}):
        with pytest.raises(ConfigError):
            validate_config("attention_fwd", bad)


@pytest.mark.parametrize("d", [8, 16, 32, 48, 64, 80, 96, 128, 192, 256])
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_default_config_fits(d, causal, dtype):
    for b, h, n in ((1, 1, 1), (1, 2, 77), (4, 8, 1000), (2, 16, 16384)):
        problem = _problem(b, h, n, n, d, causal, dtype)
        cfg = default_config("attention_fwd", problem)
        assert problem_misfit(cfg, problem) is None
        assert not cfg["tma"] and not cfg["warp_specialize"]  # left to the tuner


@pytest.mark.parametrize("b,h,n,d", BENCH)
def test_default_config_is_in_the_exhaustive_set(b, h, n, d):
    problem = _problem(b, h, n, n, d, causal=True)
    configs = set(fitting_configs("attention_fwd", problem, features=frozenset()))
    assert default_config("attention_fwd", problem) in configs


def test_exhaustive_set_respects_problem_and_features():
    problem = _problem(nq=40, nk=20, d=64, dtype="bfloat16")
    plain = list(fitting_configs("attention_fwd", problem, features=frozenset()))
    assert plain and len(plain) == len(set(plain))
    assert all(c["BLOCK_M"] <= 64 and c["BLOCK_N"] <= 32 for c in plain)
    assert not any(c["tma"] or c["warp_specialize"] for c in plain)
    hopper = list(fitting_configs("attention_fwd", problem,
                                  features=frozenset({"tma", "warp_specialize"})))
    assert len(hopper) == 4 * len(plain)
    fp16 = list(fitting_configs("attention_fwd", dataclasses.replace(problem, dtype="float16"),
                                features=frozenset()))
    assert fp16 == plain  # the dtype chooses nothing (pv_acc='fp16', fp16 only, left the space)


def test_large_head_dim_prunes_tiles_that_do_not_fit():
    big = list(fitting_configs("attention_fwd", _problem(nq=4096, nk=4096, d=256), frozenset()))
    assert big
    assert not any(c["BLOCK_M"] == 256 and c["num_warps"] <= 4 for c in big)
    assert not any(c["BLOCK_N"] == 256 and c["num_stages"] >= 2 for c in big)


def test_bucket_fields_and_bucket_wide_fit():
    problem = _problem(b=3, h=5, nq=1000, nk=600, d=80, causal=True)
    assert problem_bucket(problem) == {"head_dim": 80, "nq_bucket": 1024, "nk_bucket": 1024,
                                       "bh_bucket": 16, "causal": True}
    largest = _problem(b=1, h=16, nq=1024, nk=1024, d=80, causal=True)
    assert problem_bucket(largest) == problem_bucket(problem)
    # Every config fitting the bucket's largest problem fits the smaller one too.
    for cfg in fitting_configs("attention_fwd", largest, frozenset()):
        assert problem_misfit(cfg, problem) is None


def test_no_hopper_features_without_cuda():
    if torch.cuda.is_available():
        pytest.skip("CUDA present")
    assert hopper_features() == frozenset()


def test_rendered_source_differs_per_code_path_and_names_its_tunables():
    base = SPACE.complete({})
    sources = {}
    for knobs in ({}, {"exp2": False}, {"persistent": True}, {"tma": True},
                  {"warp_specialize": True}):
        cfg = SPACE.complete(knobs)
        sources[tuple(knobs.items())] = render_variant("attention_fwd", cfg).source
    assert len(set(sources.values())) == len(sources)
    text = render_variant("attention_fwd", base).source
    for name in SPACE.names:
        assert f"#   {name}" in text
    assert "tl.exp2" in text and "tl.make_tensor_descriptor" not in text
    assert "make_tensor_descriptor" in sources[(("tma", True),)]
    assert "warp_specialize=True" in sources[(("warp_specialize", True),)]
    compile(text, "attention_fwd", "exec")
