"""Variant spaces, validation, rendering, hashing, atomic source files, load-once."""

from __future__ import annotations

import ast
import dataclasses
import itertools
import math
import os
import random
import re

import jinja2
import pytest

from flashtune import once
from flashtune.gen import ConfigError, load_variant, render_variant, source_path
from flashtune.gen import loader as loader_mod
from flashtune.gen.attention_space import SPACE as ATTENTION_SPACE
from flashtune.gen.space import Config, Param, VariantSpace
from flashtune.gen import render as render_mod
from flashtune.gen.softmax_space import (BACKWARD_SPACE, FORWARD_SPACE, HOLDING_REGIMES,
                                         MAX_FUSED_SPLITS, MAX_HELD_PER_THREAD,
                                         OPS, PERSISTENT_SPLITS_PER_PROGRAM, SPLITTING_REGIMES,
                                         SoftmaxProblem, default_config,
                                         fitting_configs, problem_misfit)

from softmax_cases import next_pow2

GOOD = {"regime": "online", "block": 1024, "rows_per_program": 1, "splits": 1, "num_warps": 4,
        "num_stages": 2, "lane_stats": True, "l2_hint": True, "exp2": True, "max_pass": False, "resident": 0, "align": False,
        "fused": False, "programs_per_sm": 0, "paired_loads": False, "vector_stats": False}


def test_validate_accepts_and_freezes():
    config = FORWARD_SPACE.validate(GOOD)
    assert dict(config) == GOOD
    assert hash(config) == hash(FORWARD_SPACE.validate(dict(GOOD)))
    with pytest.raises(TypeError):
        config["block"] = 2048  # type: ignore[index]


@pytest.mark.parametrize("change,message", [
    ({"blok": 1024}, "unknown keys"),
    ({"block": "1024"}, "block must be of type int"),
    ({"block": 1024.0}, "block must be of type int"),
    ({"block": True}, "block must be of type int"),
    ({"exp2": 1}, "exp2 must be of type bool"),
    ({"block": 1000}, "outside the space"),
    ({"num_warps": 64}, "outside the space"),
    ({"regime": "fast"}, "outside the space"),
    ({"splits": 4}, "splits must be 1 outside the split and coop regimes"),
    ({"block": 32768}, "block must be <= 16384"),
    ({"block": 8}, "block must be >= 16 outside the row regime"),
    ({"regime": "row", "block": 16, "rows_per_program": 1024, "num_stages": 1, "lane_stats": False,
      "l2_hint": False}, "outside the space"),
    ({"align": True, "resident": 1024}, "align walks the row from its first chunk"),
    ({"align": True, "regime": "row", "num_stages": 1, "lane_stats": False, "l2_hint": False},
     "align applies to the online and split regimes only"),
    ({"fused": True}, "fused applies to the split regime only"),
])
def test_validate_rejects(change, message):
    raw = dict(GOOD, **change)
    with pytest.raises(ConfigError, match=message):
        FORWARD_SPACE.validate(raw)


def test_validate_rejects_missing_keys_and_non_mappings():
    raw = dict(GOOD)
    del raw["num_warps"]
    with pytest.raises(ConfigError, match="missing keys"):
        FORWARD_SPACE.validate(raw)
    with pytest.raises(ConfigError, match="mapping"):
        FORWARD_SPACE.validate([("block", 1024)])  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="unknown keys"):
        BACKWARD_SPACE.validate(GOOD)  # backward has no exp form


@pytest.mark.parametrize("entry,op", [
    ("op_spec", "softmaxx"), ("op_spec", ["softmax"]),
    ("validate_config", "softmaxx"), ("validate_config", ["softmax"]),
    ("render_variant", ["softmax"]),
    ("template_family_hash", "softmaxx"),  # (an unhashable op: lru_cache's own TypeError)
])
def test_an_op_that_is_not_ours_is_a_value_error_naming_it(entry, op):
    # template_family_hash("softmaxx") raised a bare KeyError('softmaxx'), and an unhashable
    # op reached the others as "unhashable type: 'list'", naming neither the op nor the ops.
    import flashtune.gen as gen

    call = getattr(gen, entry)
    with pytest.raises(ValueError, match=r"unknown op .*expected one of .*softmax"):
        call(op) if entry in ("op_spec", "template_family_hash") else call(op, GOOD)


@pytest.mark.parametrize("space", [FORWARD_SPACE, BACKWARD_SPACE, ATTENTION_SPACE],
                         ids=lambda s: s.name)
def test_every_walked_config_is_valid_and_distinct(space):
    """The walk does not ask a constraint again once it has accepted a partial choice, not even
    of the complete configs: each one must still pass validate's every constraint."""
    configs = list(space.exhaustive())
    assert len(configs) == len(set(configs)) > 100
    # validate's rule, without building a Config per config (is_valid: 4x slower here).
    assert not [raw for raw in map(Config.as_dict, configs)
                if any(rule(raw) is not None for rule in space.constraints)]
    assert all(space.is_valid(dict(c)) for c in configs[:: max(1, len(configs) // 2000)])


def test_exhaustive_size():
    configs = list(FORWARD_SPACE.exhaustive())
    # What the docstrings of exhaustive() and _walk say of this space's size (they said 119K
    # of 6.6M, out of date since the space grew): over 1e5 valid configs of a product over 1e9.
    assert len(configs) > 100_000
    assert math.prod(len(p.exhaustive) for p in FORWARD_SPACE.params) > 10**9


def _brute_force(space):
    out = []
    for values in itertools.product(*(p.exhaustive for p in space.params)):
        raw = dict(zip(space.names, values))
        if all(c(raw) is None for c in space.constraints):
            out.append(raw)
    return out


def _toy_space(*constraints):
    return VariantSpace("toy", (Param("a", int, (0, 1, 2, 3), 1, "a"),
                                Param("b", int, (1, 2, 3), 1, "b"),
                                Param("c", int, (0, 1, 2), 0, "c")), constraints)


def late_get(cfg):  # reads "c" (chosen last) with a default that would mislead if used
    return "c needs a" if cfg.get("c", 2) == 2 and cfg["a"] != 1 else None


def membership(cfg):  # "c" is in every whole config; a partial one must not answer "absent"
    return "c is missing" if cfg["b"] == 3 and "c" not in cfg else None


def by_items(cfg):  # iterates: only judged on whole configs
    return "at most one 3" if sum(v == 3 for _, v in cfg.items()) > 1 else None


def catches_everything(cfg):  # a broad except must not turn "not chosen yet" into a rejection
    try:
        return "b > c" if cfg["b"] > cfg["c"] + 1 else None
    except Exception:  # noqa: BLE001
        return "unreadable"


def guarded_division(cfg):  # relies on the constraint before it having rejected a == 0
    return "b not a multiple" if 12 // cfg["a"] % cfg["b"] else None


@pytest.mark.parametrize("constraints", [
    (late_get, membership, lambda cfg: "a<b" if cfg["a"] < cfg["b"] else None),
    (by_items,),
    (catches_everything,),
    (lambda cfg: "a=0" if cfg["a"] == 0 else None, guarded_division),
], ids=["get-membership", "items", "broad-except", "guarded-division"])
def test_pruned_enumeration_equals_the_filtered_product(constraints):
    """exhaustive() cuts branches early; it must keep exactly the configs, in the same order,
    of filtering the whole product with validate's rule."""
    space = _toy_space(*constraints)
    assert [dict(c) for c in space.exhaustive()] == _brute_force(space)


def test_pruned_enumeration_of_the_real_spaces():
    for space in (BACKWARD_SPACE, ATTENTION_SPACE):
        assert [dict(c) for c in space.exhaustive()] == _brute_force(space)
    # The forward product is 211M configs, too many to filter one by one in CI (50M took four
    # minutes). The check keeps every constraint's boundary and pins each knob to the values
    # on both sides of it: exp2 enters no constraint (checked on a sample); blocks are the
    # thresholds (8 and 16 for the tiles only the row regime may have, 16 and 32 for threads
    # with work, 1024 x 64 rows for the row tile, 16384 chunks, 32768 coop segments, 65536
    # tiles); rows 1 (pinned outside the row regime), 2, 64 and 512 (the most); splits 1, 2
    # (the splitting regimes' least) and 256; resident, programs_per_sm and stages: 0 or 1
    # against one other value (constraints only ask "is it set"); every warp count (threads
    # with work compares it with block x rows). About 1M configs.
    pins = {"exp2": (True,), "block": (8, 16, 32, 1024, 16384, 32768, 65536),
            "rows_per_program": (1, 2, 64, 512), "splits": (1, 2, 256), "resident": (0, 32768),
            "programs_per_sm": (0, 4), "num_stages": (1, 4)}
    pinned = VariantSpace(FORWARD_SPACE.name, tuple(
        dataclasses.replace(p, exhaustive=pins[p.name]) if p.name in pins else p
        for p in FORWARD_SPACE.params), FORWARD_SPACE.constraints)
    pinned_configs = [dict(c) for c in pinned.exhaustive()]
    assert pinned_configs == _brute_force(pinned)
    rng = random.Random(0)
    for _ in range(20000):
        raw = {p.name: rng.choice(p.exhaustive) for p in FORWARD_SPACE.params}
        verdicts = [[c(dict(raw, exp2=e)) is None for c in FORWARD_SPACE.constraints]
                    for e in (False, True)]
        assert verdicts[0] == verdicts[1], raw
    kept = {name: values for name, values in pins.items() if name != "exp2"}
    forward = {tuple(sorted(dict(c).items())) for c in FORWARD_SPACE.exhaustive()
               if all(c[name] in values for name, values in kept.items())}
    assert forward == {tuple(sorted(dict(c, exp2=e).items()))
                       for c in pinned_configs for e in (False, True)}


def test_a_space_without_tunables_has_one_config():
    assert [dict(c) for c in VariantSpace("empty", ()).exhaustive()] == [{}]


@pytest.mark.parametrize("shape", [(65536, 128), (4096, 50257), (16, 1048576), (1024, 65536),
                                   (1, 1), (3, 100000)])
@pytest.mark.parametrize("op", sorted(OPS))
def test_default_config_fits(op, shape):
    problem = SoftmaxProblem(*shape, "float16")
    config = default_config(op, problem)
    assert problem_misfit(config, problem) is None


@pytest.mark.parametrize("cols", (1, 2, 3, 5, 8, 13, 16))
@pytest.mark.parametrize("op", sorted(OPS))
def test_narrow_rows_default_to_a_tile_of_their_own_width(op, cols):
    """Rows of up to 16 columns get a row tile of their next power of two (below 16 too: a
    16-column tile keeps 5 of 16 lanes busy on rows of 5), valid in the space."""
    problem = SoftmaxProblem(200000, cols, "bfloat16")
    config = default_config(op, problem)
    assert config["regime"] == "row" and config["block"] == next_pow2(cols)
    assert OPS[op].space.validate(dict(config)) == config and problem_misfit(config, problem) is None


@pytest.mark.parametrize("cols", (3, 8))
@pytest.mark.parametrize("op", ("softmax", "softmax_backward"))
def test_tuner_offers_narrow_rows_row_tiles_of_their_width(op, cols):
    problem = SoftmaxProblem(200000, cols, "float16")
    width = next_pow2(cols)
    assert {c["block"] for c in fitting_configs(op, problem) if c["regime"] == "row"} == {width}


def test_fitting_configs_fit_their_problem():
    problem = SoftmaxProblem(128, 3000, "float32")
    configs = list(fitting_configs("softmax", problem))
    assert configs and all(problem_misfit(c, problem) is None for c in configs)
    assert {c["regime"] for c in configs} == {"row", "online", "split", "coop"}
    backward = {c["regime"] for c in fitting_configs("softmax_backward", problem)}
    assert backward == {"row", "online", "split"}


@pytest.mark.parametrize("dtype,cols,aligned", [
    ("float16", 50257, False), ("bfloat16", 65540, False), ("float16", 65536, True),
    ("float32", 50258, False), ("float32", 65540, True)])
def test_align_only_where_rows_start_off_a_boundary(dtype, cols, aligned):
    """The default walks rows from 16-byte boundaries exactly when a contiguous row of this
    width starts off one (16 // element size columns), and the tuner's candidate list offers
    the aligned walk only then."""
    problem = SoftmaxProblem(4096, cols, dtype)
    config = default_config("softmax", problem)
    assert config["regime"] == "online" and config["align"] is (not aligned)
    offered = {c["align"] for c in fitting_configs("softmax", SoftmaxProblem(256, cols, dtype))
               if c["regime"] == "online"}
    assert offered == ({False} if aligned else {False, True})


@pytest.mark.parametrize("dtype,cols,offered", [
    ("float16", 50264, False), ("bfloat16", 65544, False), ("float16", 50260, True),
    ("float16", 50257, True), ("float32", 50258, True)])
def test_split_align_offered_only_for_rows_off_a_vector(dtype, cols, offered):
    """The split regime takes row lengths and strides in grains, so 16-bit rows of 8 mod 16
    columns (whole 16-byte vectors) load vectors without the aligned walk: its default walks
    them unaligned, and the tuner's candidates do not offer split configs with align there
    (twins that only add the edges' loads). The online regime still gets it offered."""
    problem = SoftmaxProblem(4, cols, dtype)
    for op in ("softmax", "softmax_backward"):
        split = {c["align"] for c in fitting_configs(op, problem) if c["regime"] == "split"}
        assert split == ({False, True} if offered else {False}), op
        online = {c["align"] for c in fitting_configs(op, problem) if c["regime"] == "online"}
        assert online == {False, True}, op


@pytest.mark.parametrize("sm_count,splits", [(132, 16), (108, 16), (32, 8), (8, 2)])
def test_few_long_rows_default_to_one_launch_within_a_quarter_of_the_sms(sm_count, splits):
    """Forward fp32 rows of fewer than 16 chunks of 8192: the fused split, with at most SMs / 4
    programs per row (so one launch may wait on them); the backward keeps the two-launch
    split. The tuner's candidates offer fused only with splits that can run in one launch
    somewhere."""
    problem = SoftmaxProblem(2, 16 * 8192 - 1, "float32")
    config = default_config("softmax", problem, sm_count=sm_count)
    assert config["regime"] == "split" and config["fused"] and config["splits"] == splits
    assert config["programs_per_sm"] == 0
    assert splits <= max(2, sm_count // 4)
    assert not dict(default_config("softmax_backward", problem, sm_count=sm_count)).get("fused")
    fused = [c["splits"] for c in fitting_configs("softmax", problem)
             if c["fused"] and not c["programs_per_sm"]]
    assert fused and max(fused) == MAX_FUSED_SPLITS


@pytest.mark.parametrize("sm_count,splits", [(132, 64), (108, 32), (32, 16), (8, 4)])
@pytest.mark.parametrize("dtype,programs", [("float16", 4), ("bfloat16", 4), ("float32", 2)])
def test_long_rows_default_to_the_persistent_split(sm_count, splits, dtype, programs):
    """Rows of 16 chunks of 8192 or more: the persistent fused split. Past the paired-loads
    range (2 x 1048576 for fp16/bf16 everywhere, 2 x 2097152 for fp32): 4 programs per SM for
    fp16/bf16, 2 for fp32, at most SMs / 2 segments per row; shorter rows keep the fused
    split. The candidates offer the persistent grid up to programs_per_sm x 64 segments per
    row (one launch on 128 SMs or more), up to the space's 256."""
    n_cols = 1_048_576 if dtype != "float32" else 2_097_152
    config = default_config("softmax", SoftmaxProblem(2, n_cols, dtype), sm_count=sm_count)
    assert config["regime"] == "split" and config["fused"] and not config["paired_loads"]
    assert config["programs_per_sm"] == programs
    assert config["splits"] == splits and splits <= sm_count // 2
    shorter = default_config("softmax", SoftmaxProblem(2, 100_000, dtype), sm_count=sm_count)
    assert shorter["fused"] and shorter["programs_per_sm"] == 0
    problem = SoftmaxProblem(2, 1_048_576, dtype)
    persistent = {}
    for c in fitting_configs("softmax", problem):
        if c["programs_per_sm"]:
            persistent[c["programs_per_sm"]] = max(persistent.get(c["programs_per_sm"], 0), c["splits"])
    assert persistent == {p: min(256, p * PERSISTENT_SPLITS_PER_PROGRAM) for p in (2, 4, 8)}


@pytest.mark.parametrize("sm_count", [132, 108, 64, 32])
@pytest.mark.parametrize("n_cols", [16 * 8192, 150_000, 200_000, 262_144, 524_288, 1_048_575,
                                    1_048_576])
@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "float32"])
def test_paired_loads_default_takes_one_chunk_segments_that_run_in_one_launch(sm_count, n_cols,
                                                                               dtype):
    """paired_loads by default for fp32 long rows, where it was measured to win (fp16/bf16
    tied or lost: they keep the plain persistent split): segments of one chunk of 4096, so
    splits x block covers the row; splits at most 256, at most a quarter of them empty
    (150000 columns: 37 of 64 chunks used), and within the one-launch bound splits <=
    programs_per_sm x SMs / 2. Rows that are not whole 16-byte vectors (1048575) walk them
    aligned."""
    problem = SoftmaxProblem(16, n_cols, dtype)
    config = default_config("softmax", problem, sm_count=sm_count)
    block = 4096
    chunks = -(-n_cols // block)
    splits = 1 << (chunks - 1).bit_length()
    expected = (dtype == "float32" and splits <= 256 and 2 * splits <= 5 * sm_count
                and 4 * chunks >= 3 * splits)
    assert config["paired_loads"] == expected, config
    assert config["align"] == (n_cols % (4 if dtype == "float32" else 8) != 0)
    assert config["regime"] == "split" and config["fused"] and config["programs_per_sm"]
    if expected:
        assert config["block"] == block and config["splits"] == splits
        assert config["splits"] * config["block"] >= n_cols  # one chunk per segment
        assert not (config["lane_stats"] or config["vector_stats"] or config["max_pass"])
    assert problem_misfit(config, problem) is None


@pytest.mark.parametrize("n_cols,sm_count", [(1_048_577, 132), (2_000_000, 132), (4_000_000, 132),
                                              (600_000, 32), (1_048_575, 32), (1_048_576, 32)])
def test_fp32_persistent_default_reads_a_segment_as_one_chunk_where_it_fits(n_cols, sm_count):
    """fp32 long rows outside the paired-loads default: the persistent split's chunk covers
    the whole segment when the segment fits in 16384 columns (one load and one reduction per
    item; faster on the H100 and H200), and is never below 8192. fp16/bf16 keep two chunks of
    8192 per segment there."""
    problem = SoftmaxProblem(4, n_cols, "float32")
    config = default_config("softmax", problem, sm_count=sm_count)
    assert config["programs_per_sm"] and not config["paired_loads"]
    segment = -(-n_cols // config["splits"])  # columns per segment, before launch() rounds up
    assert config["block"] == (max(8192, 1 << (segment - 1).bit_length()) if segment <= 16384
                               else 16384)
    assert 8192 <= config["block"] <= 16384
    assert problem_misfit(config, problem) is None
    assert default_config("softmax", SoftmaxProblem(4, n_cols, "float16"),
                          sm_count=sm_count)["block"] == 8192


def test_programs_per_sm_only_with_the_fused_split():
    space = OPS["softmax"].space
    base = dict(regime="split", block=1024, splits=8, num_warps=4, num_stages=1, l2_hint=True)
    assert space.complete(dict(base, fused=True, programs_per_sm=2))["programs_per_sm"] == 2
    for bad in (dict(base, fused=False, programs_per_sm=2),
                dict(regime="online", block=1024, num_warps=4, programs_per_sm=4)):
        with pytest.raises(ConfigError, match="programs_per_sm"):
            space.complete(bad)
    with pytest.raises(ConfigError):
        space.complete(dict(base, fused=True, programs_per_sm=3))  # not in (0, 2, 4, 8)


def test_paired_loads_only_with_the_persistent_split_and_plain_statistics():
    space = OPS["softmax"].space
    base = dict(regime="split", block=1024, splits=8, num_warps=4, num_stages=1, l2_hint=True,
                fused=True, programs_per_sm=4)
    assert space.complete(dict(base, paired_loads=True))["paired_loads"]
    for bad in (dict(base, programs_per_sm=0, paired_loads=True),
                dict(base, fused=False, programs_per_sm=0, paired_loads=True),
                dict(base, paired_loads=True, lane_stats=True),
                dict(base, paired_loads=True, vector_stats=True),
                dict(base, paired_loads=True, max_pass=True)):
        with pytest.raises(ConfigError, match="paired_loads"):
            space.complete(bad)
    with pytest.raises(ConfigError, match="unknown keys"):
        OPS["softmax_backward"].space.complete(dict(regime="split", block=1024, splits=8,
                                                    paired_loads=False))
    problem = SoftmaxProblem(16, 1_000_000, "float16")
    paired = [c for c in fitting_configs("softmax", problem) if c["paired_loads"]]
    assert paired and all(c["splits"] * c["block"] >= problem.n_cols and c["num_stages"] == 1
                          for c in paired)


def test_candidates_never_hold_more_elements_per_thread_than_registers():
    """The tuner's candidates skip held tiles (row, coop) of more than 128 elements per thread
    (they spill and take ptxas long to compile), but keep 128, the 65536-column row's best."""
    problem = SoftmaxProblem(64, 65536, "float16")
    held = [c for c in fitting_configs("softmax", problem) if c["regime"] in HOLDING_REGIMES]
    per_thread = {c["block"] * c["rows_per_program"] // (32 * c["num_warps"]) for c in held}
    assert held and max(per_thread) == MAX_HELD_PER_THREAD
    assert any(c["regime"] == "row" and c["block"] == 65536 and c["num_warps"] == 16 for c in held)


def test_render_is_stable_and_parses():
    a = render_variant("softmax", GOOD)
    b = render_variant("softmax", dict(GOOD))
    assert a.hash == b.hash and a.source == b.source
    other = render_variant("softmax", dict(GOOD, block=2048))
    assert other.hash != a.hash
    ast.parse(a.source)  # valid Python


@pytest.mark.parametrize("op", sorted(OPS))
@pytest.mark.parametrize("regime", ["row", "online", "split", "coop"])
def test_header_lists_every_tunable_and_asserts(op, regime):
    space = OPS[op].space
    if regime not in OPS[op].regimes:
        with pytest.raises(ConfigError, match="regime"):
            space.validate(dict(space.complete({}), regime=regime))
        return
    raw = {p.name: p.default for p in space.params}
    raw.update(regime=regime, num_stages=1 if regime in HOLDING_REGIMES else 2,
               splits=4 if regime in SPLITTING_REGIMES else 1)
    source = render_variant(op, raw).source
    header = source.split("import triton")[0]
    for name in space.names:
        assert re.search(rf"#\s+{name}\s+=", header), f"{name} missing from the header"
    assert "tl.static_assert" in source


def test_strict_undefined():
    env = render_mod.environment()
    assert env.undefined is jinja2.StrictUndefined
    with pytest.raises(jinja2.UndefinedError):
        env.from_string("{{ missing }}").render()


def test_render_refuses_unvalidated_config():
    with pytest.raises(TypeError, match="validated Config"):
        render_mod.render("softmax_row.py.jinja", "softmax", dict(GOOD), {})


def test_source_written_atomically_and_loaded_once(tmp_path, monkeypatch):
    monkeypatch.setenv("FLASHTUNE_CACHE_DIR", str(tmp_path))
    module = load_variant("softmax", GOOD)
    path = source_path("softmax", GOOD)
    assert path.parent == tmp_path / "kernels"
    assert path.read_text() == render_variant("softmax", GOOD).source
    assert module.__file__ == str(path)
    assert load_variant("softmax", dict(GOOD)) is module
    assert not [p for p in os.listdir(path.parent) if p.endswith(".tmp")]


def test_unwritable_cache_dir_falls_back_with_one_warning(tmp_path, monkeypatch):
    blocker = tmp_path / "a_file"
    blocker.write_text("not a folder")
    monkeypatch.setenv("FLASHTUNE_CACHE_DIR", str(blocker / "sub"))
    fallback = tmp_path / "fallback"
    monkeypatch.setattr(loader_mod, "fallback_kernel_dir", lambda: fallback)
    with pytest.warns(RuntimeWarning, match="FLASHTUNE_CACHE_DIR"):
        module = load_variant("softmax", dict(GOOD, block=512))
    assert module.__file__.startswith(str(fallback))


def test_unwritable_cache_and_temp_dir_is_clear(tmp_path, monkeypatch):
    blocker = tmp_path / "a_file"
    blocker.write_text("not a folder")
    monkeypatch.setenv("FLASHTUNE_CACHE_DIR", str(blocker / "sub"))
    monkeypatch.setattr(loader_mod, "fallback_kernel_dir", lambda: blocker / "tmp")
    monkeypatch.setattr(once, "_said", {})
    variant = render_variant("softmax", dict(GOOD, block=256))
    with pytest.raises(OSError, match="FLASHTUNE_CACHE_DIR"):  # `flashtune source --path`
        loader_mod.write_source(variant)
    # The runtime's load says the same once, and runs the kernel from memory.
    with pytest.warns(RuntimeWarning, match="FLASHTUNE_CACHE_DIR"):
        module = load_variant("softmax", dict(GOOD, block=256))
    assert callable(module.launch) and "source not written" in module.__spec__.origin


@pytest.mark.parametrize("regime", ["split", "coop"])
def test_split_programs_beyond_the_grid_limit_are_a_misfit(regime):
    """rows x splits programs ride one grid axis (at most 2**31 - 1): more is a misfit, so the
    dispatcher never launches a grid the driver refuses (or a coop ticket that wraps)."""
    config = OPS["softmax"].space.validate(dict(OPS["softmax"].space.complete({}), regime=regime,
                                                block=1024, splits=4, num_stages=1))
    fits = SoftmaxProblem(2**29 - 1, 4000, "float16")
    assert problem_misfit(config, fits) is None
    too_many = SoftmaxProblem(2**29, 4000, "float16")
    assert "grid limit" in problem_misfit(config, too_many)


@pytest.mark.parametrize("op", ["softmax", "softmax_backward"])
@pytest.mark.parametrize("regime, rows_each", [("online", 1), ("row", 1), ("row", 4)])
def test_row_and_online_programs_beyond_the_grid_limit_are_a_misfit(op, regime, rows_each):
    """The online regime launches a program per row, the row regime one per rows_per_program
    rows: past 2**31 - 1 programs (a 12 GiB fp16 tensor of 3 columns) a tuned winner said it
    fit and the launch would fail on the GPU. The default (many rows per program) still fits."""
    space = OPS[op].space
    config = space.validate(dict(space.complete({}), regime=regime, block=16, num_warps=1,
                                 rows_per_program=rows_each, num_stages=1))
    limit = 2**31 - 1
    assert problem_misfit(config, SoftmaxProblem(limit * rows_each, 3, "float16")) is None
    too_many = SoftmaxProblem(limit * rows_each + 1, 3, "float16")
    assert "grid limit" in problem_misfit(config, too_many)
    assert problem_misfit(default_config(op, too_many), too_many) is None


def _flashtune_imports(source: str) -> set[str]:
    """The flashtune modules a rendered kernel module imports (``from flashtune.gen import
    row_sync`` names flashtune.gen.row_sync)."""
    import importlib.util

    found = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names if a.name.startswith("flashtune"))
        elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("flashtune"):
            for alias in node.names:
                name = f"{node.module}.{alias.name}"
                found.add(name if importlib.util.find_spec(name) else node.module)
    return found


@pytest.mark.parametrize("op,raw", [
    ("softmax", dict(regime="coop", block=4096, splits=4, num_stages=1)),
    ("log_softmax", dict(regime="split", block=1024, splits=4, num_stages=1, fused=True,
                         programs_per_sm=4, paired_loads=True)),
    ("softmax_backward", dict(regime="split", block=1024, splits=4, num_stages=2)),
    ("attention_fwd", dict(persistent=True, tma=True)),
])
def test_the_family_hash_covers_the_modules_kernels_import(op, raw):
    """A rendered kernel runs code of flashtune modules it imports (row_sync decides one launch
    or two, the persistent grid, the wait bound): they are part of what a tuned winner was
    timed with, so the family hash must cover them as it covers the templates."""
    from flashtune.gen.registry import FAMILY_MODULES, op_spec

    source = render_variant(op, op_spec(op).space.complete(raw)).source
    assert _flashtune_imports(source) <= set(FAMILY_MODULES[op])


def test_a_changed_helper_module_changes_the_family_hash(tmp_path, monkeypatch):
    """Winners tuned with another flashtune.gen.row_sync are winners of another family (as
    after a template change); attention kernels import no flashtune module: their hash stays
    the templates' alone."""
    from importlib import resources

    from flashtune.gen import variants

    before = {op: variants.template_family_hash(op) for op in ("softmax", "attention_fwd")}
    real_files = resources.files
    changed = tmp_path / "gen"
    changed.mkdir()
    text = real_files("flashtune.gen").joinpath("row_sync.py").read_text()
    (changed / "row_sync.py").write_text(text.replace("MAX_POLLS = 1 << 16", "MAX_POLLS = 1 << 4"))
    monkeypatch.setattr(resources, "files",
                        lambda package: changed if package == "flashtune.gen" else real_files(package))
    variants.template_family_hash.cache_clear()
    try:
        assert variants.template_family_hash("softmax") != before["softmax"]
        assert variants.template_family_hash("attention_fwd") == before["attention_fwd"]
    finally:
        monkeypatch.undo()
        variants.template_family_hash.cache_clear()
    assert variants.template_family_hash("softmax") == before["softmax"]


def test_a_walked_config_reads_and_compares_as_a_validated_one():
    """exhaustive() builds its configs by a fast path (sorted items, a shared map of positions):
    each must equal, hash and read as the config validate() makes of the same values."""
    import pickle

    from flashtune.gen import OPS

    space = OPS["softmax"].space
    walked = next(iter(space.exhaustive()))
    made = space.validate(walked.as_dict())
    assert walked == made and hash(walked) == hash(made) and list(walked) == list(made)
    assert all(walked[name] == made[name] == walked.get(name) for name in made)
    assert pickle.loads(pickle.dumps(walked)) == walked
    # A pickle made before configs had their positions' map: copyreg's state of the slots.
    import copyreg

    from flashtune.gen.space import Config

    old = copyreg.__newobj__(Config)
    old.__setstate__((None, {"space_name": walked.space_name, "_items": walked._items}))
    assert old == walked and old["regime"] == walked["regime"]
    for key in ("no_such_knob", ["unhashable"]):
        with pytest.raises(KeyError):
            walked[key]
        assert walked.get(key, "default") == "default" and key not in walked
