"""flashtune.attention through the dispatcher: exact / nearest / default choices on a seeded
database, fallback of a failing tuned config, logging, `flashtune show`, and no database work
after warm-up. Without a GPU everything runs in Triton's interpreter on CPU tensors."""

from __future__ import annotations

import logging
import warnings

import pytest
import torch

import flashtune
import flashtune.dispatch as dispatch
from attention_cases import Shape, check_case, config, make_qkv
from dispatch_helpers import DEVICE, fresh_db, sm_count  # noqa: F401
from dispatch_helpers import seed_attention as seed
from flashtune.cli import main
from flashtune.dispatch import DispatchWarning
from flashtune.gen import attention_ops
from flashtune.gen.attention_space import AttentionProblem, default_config

pytestmark = [pytest.mark.filterwarnings("ignore::RuntimeWarning:triton"),
              pytest.mark.filterwarnings("ignore::flashtune.cache.CacheWarning")]

OP = "attention_fwd"


def problem(nq=24, nk=24, d=32, causal=False, dtype="float16", b=1, h=2) -> AttentionProblem:
    return AttentionProblem(b, h, h, nq, nk, d, causal, dtype)


def qkv(p: AttentionProblem):
    dtype = getattr(torch, p.dtype)
    return make_qkv(Shape(p.batch, p.heads, p.kv_heads, p.nq, p.nk, p.head_dim), dtype, DEVICE)


def test_exact_bucket_wins_and_runs(fresh_db, monkeypatch):
    tuned = config(BLOCK_M=16, BLOCK_N=16, exp2=False)
    seed(fresh_db, problem(nq=32, nk=32), tuned)  # bucket of nq = nk = 24 too (rounded to 32)
    p = problem()
    picked = dispatch.attention_choice(p, DEVICE)
    assert picked.how == "exact" and picked.config.as_dict() == tuned
    q, k, v = qkv(p)
    seen = []
    real = attention_ops.run_variant

    def spy(op, cfg, *args):
        seen.append(cfg.as_dict())
        return real(op, cfg, *args)

    monkeypatch.setattr(attention_ops, "run_variant", spy)
    out = flashtune.attention(q, k, v)
    assert seen == [tuned]  # the tuned config is the one that ran
    assert check_case(out, None, q, k, v, False) is None


def test_nearest_bucket_same_head_dim_and_causal_that_fits(fresh_db):
    p = problem(nq=100, nk=100, causal=True, dtype="bfloat16")  # bucket nq = nk = 128
    # Closer but excluded: another head dim, another causal flag, and a config that cannot
    # run (registers past the bound). The fitting one at 64 (distance 2) beats the one at
    # 1024 (6).
    seed(fresh_db, problem(nq=128, nk=128, d=64, causal=True, dtype="bfloat16"), config(BLOCK_M=32))
    seed(fresh_db, problem(nq=128, nk=128, causal=False, dtype="bfloat16"), config(BLOCK_M=32))
    seed(fresh_db, problem(nq=256, nk=256, causal=True, dtype="bfloat16"),
         config(BLOCK_M=128, BLOCK_N=128, num_warps=1))
    near = config(BLOCK_M=32, BLOCK_N=32)
    seed(fresh_db, problem(nq=64, nk=64, causal=True, dtype="bfloat16"), near)
    seed(fresh_db, problem(nq=1024, nk=1024, causal=True, dtype="bfloat16"), config(BLOCK_M=64))
    picked = dispatch.attention_choice(p, DEVICE)
    assert picked.how == "nearest", picked.describe()
    assert dict(picked.tuned_bucket)["nq_bucket"] == 64
    assert picked.config.as_dict() == near


def test_default_when_nothing_fits(fresh_db):
    p = problem(dtype="bfloat16")
    seed(fresh_db, problem(dtype="float16"), config(BLOCK_M=16))  # other dtype
    seed(fresh_db, p, config(BLOCK_M=16), family_hash="0" * 16)  # stale templates
    seed(fresh_db, problem(nq=64, nk=64, dtype="bfloat16"),
         config(BLOCK_M=128, BLOCK_N=128, num_warps=1))  # misfit: registers past the bound
    picked = dispatch.attention_choice(p, DEVICE)
    assert picked.how == "default"
    assert picked.config == default_config(OP, p, sm_count=sm_count())
    q, k, v = qkv(p)
    assert check_case(flashtune.attention(q, k, v), None, q, k, v, False) is None


def test_no_database_access_after_warm_up(fresh_db):
    from sqlalchemy import event
    from sqlalchemy.engine import Engine

    seed(fresh_db, problem(), config(BLOCK_M=16, BLOCK_N=16))
    queries = []

    def count(*args, **kwargs):
        queries.append(args[2] if len(args) > 2 else None)

    q, k, v = qkv(problem())
    event.listen(Engine, "before_cursor_execute", count)
    try:
        flashtune.attention(q, k, v)  # warm-up: loads the table (the one read)
        assert queries, "the warm-up call should have read the winner table"
        queries.clear()
        for _ in range(3):
            flashtune.attention(q, k, v)
        flashtune.attention(q, k, v, causal=True)  # a new problem: the in-memory table
        flashtune.softmax(torch.randn(4, 8, device=DEVICE))  # one table for both families
        assert queries == []
    finally:
        event.remove(Engine, "before_cursor_execute", count)
    key = (OP, -1 if DEVICE == "cpu" else torch.cuda.current_device(), problem())
    assert key in dispatch.RUNTIME.dispatcher._choices  # memoized per problem


def test_broken_database_gives_default_and_one_warning(fresh_db):
    fresh_db.write_bytes(b"not a database" * 100)
    p = problem()
    q, k, v = qkv(p)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for causal in (False, True, False):
            out = flashtune.attention(q, k, v, causal=causal)
        flashtune.softmax(torch.randn(3, 5, device=DEVICE))
    assert check_case(out, None, q, k, v, False) is None
    from flashtune.cache import CacheWarning

    ours = [w for w in caught if issubclass(w.category, (CacheWarning, DispatchWarning))]
    assert len(ours) == 1, [str(w.message) for w in ours]
    assert dispatch.attention_choice(p, DEVICE).how == "default"


def test_failing_tuned_config_falls_back_to_default_with_one_warning(fresh_db, monkeypatch):
    seed(fresh_db, problem(), config(BLOCK_M=16, BLOCK_N=16))
    real = attention_ops.run_variant

    def picky(op, cfg, *args):
        if cfg["BLOCK_M"] == 16:
            raise RuntimeError("out of resources (simulated)")
        return real(op, cfg, *args)

    monkeypatch.setattr(attention_ops, "run_variant", picky)
    q, k, v = qkv(problem())
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for _ in range(3):
            out = flashtune.attention(q, k, v)
    assert check_case(out, None, q, k, v, False) is None
    assert len([w for w in caught if issubclass(w.category, DispatchWarning)]) == 1
    assert dispatch.attention_choice(problem(), DEVICE).how == "default"
    with pytest.raises(ValueError, match="head dim"):  # input errors stay the caller's
        flashtune.attention(q[..., :12], k[..., :12], v[..., :12])


def test_log_switch_logs_attention_choice_once(fresh_db, monkeypatch, caplog):
    monkeypatch.setenv("FLASHTUNE_LOG", "1")
    dispatch.reset()
    seed(fresh_db, problem(), config(BLOCK_M=16, BLOCK_N=16))
    q, k, v = qkv(problem())
    with caplog.at_level(logging.INFO, logger="flashtune"):
        for _ in range(3):
            flashtune.attention(q, k, v)
    records = [r.getMessage() for r in caplog.records if r.name == "flashtune"]
    assert len(records) == 1, records
    assert "attention_fwd B1 H2 N24 D32 float16" in records[0] and "exact" in records[0]
    assert "'BLOCK_M': 16" in records[0] and records[0].rstrip().endswith(".py")


def test_show_lists_attention_winners(fresh_db, capsys):
    seed(fresh_db, problem(nq=1000, nk=1000, d=128, causal=True, b=4, h=32),
         config(BLOCK_M=64, BLOCK_N=32, num_warps=4, num_stages=2, exp2=True))
    assert main(["show"]) == 0
    out = capsys.readouterr().out
    line = next(l for l in out.splitlines() if l.startswith("attention_fwd"))
    assert "d128 n1024 bh128 causal" in line and "M64 N32 warps=4 stages=2 +exp2" in line
    assert main(["show", "--op", "attention_fwd"]) == 0
    assert "attention_fwd" in capsys.readouterr().out


def test_disable_switch_uses_the_heuristic_without_database(fresh_db, monkeypatch):
    seed(fresh_db, problem(), config(BLOCK_M=16, BLOCK_N=16))
    monkeypatch.setenv("FLASHTUNE_DISABLE", "1")
    dispatch.reset()
    seen = []
    real = attention_ops.run_variant

    def spy(op, cfg, *args):
        seen.append(cfg)
        return real(op, cfg, *args)

    monkeypatch.setattr(attention_ops, "run_variant", spy)
    monkeypatch.setattr(dispatch.RUNTIME.dispatcher, "_reader",
                        lambda device: pytest.fail("database read while disabled"))
    q, k, v = qkv(problem())
    out = flashtune.attention(q, k, v)
    assert seen == [default_config(OP, problem())]
    assert check_case(out, None, q, k, v, False) is None


def test_nearest_winner_with_tiles_longer_than_the_problem_does_not_serve_it(fresh_db):
    """The tuner offers only tiles up to the (16-padded) sequence lengths: a larger tile only
    adds masked rows or keys. A prefill winner (128-row query tiles) must not serve a decode
    step (Nq = 1, 1 row of 128 kept) nor its 64-key tiles a 16-key problem as "nearest"; the
    default sizes its tiles to the problem. Problems with room for the tiles still get it."""
    prefill = config(BLOCK_M=128, BLOCK_N=64, num_warps=8)
    seed(fresh_db, problem(nq=1024, nk=1024), prefill)
    for small in (problem(nq=1, nk=1024), problem(nq=1024, nk=16)):
        picked = dispatch.attention_choice(small, DEVICE)
        assert picked.how == "default", picked.describe()
        assert picked.config["BLOCK_M"] <= max(16, small.nq), picked.describe()
        q, k, v = qkv(small)
        assert check_case(flashtune.attention(q, k, v), None, q, k, v, False) is None
    picked = dispatch.attention_choice(problem(nq=100, nk=500), DEVICE)  # buckets 128 / 512
    assert picked.how == "nearest" and picked.config.as_dict() == prefill


@pytest.mark.parametrize("fields, named", [
    (dict(head_dim=7), "head_dim"),
    (dict(head_dim=512), "head_dim"),
    (dict(dtype="float32"), "dtype"),
    (dict(kv_heads=3), "kv_heads"),
    (dict(heads=0, kv_heads=0), "heads"),
    (dict(nq=-5), "nq"),
    (dict(nk=0), "nk"),
    (dict(batch=1.5), "batch"),
    (dict(causal="yes"), "causal"),
])
def test_choice_refuses_a_problem_no_call_can_have(fresh_db, fields, named):
    """attention_choice answered a "default" config for problems flashtune.attention refuses
    (head dim 7 or 512, float32, 3 kv heads for 2 query heads, negative lengths, causal="yes"),
    where dispatch.choice refuses a bad softmax shape or dtype: a ValueError/TypeError naming
    the field instead."""
    base = dict(batch=1, heads=2, kv_heads=2, nq=16, nk=16, head_dim=32, causal=False,
                dtype="float16")
    bad = AttentionProblem(**{**base, **fields})
    with pytest.raises((ValueError, TypeError), match=named):
        dispatch.attention_choice(bad, DEVICE)
    assert dispatch.attention_choice(AttentionProblem(**base), DEVICE).how == "default"


def test_a_tuned_config_a_call_cannot_run_falls_back_under_the_readme_filters(fresh_db):
    # Defect (audit): a tuned tma winner given rows that are not 16-byte aligned fell back with
    # a plain RuntimeWarning, not the DispatchWarning README tells users to let through where
    # warnings are errors: it raised there, and the dispatcher then rejected the winner for
    # the whole device, aligned calls included.
    if "tma" not in attention_ops.triton_features():
        pytest.skip("this Triton has no tensor descriptors")
    p = problem(nq=32, nk=32, d=64)
    tuned = config(BLOCK_M=32, BLOCK_N=32, tma=True)
    seed(fresh_db, p, tuned)
    q_odd = torch.randn(1, 2, 32, 68, dtype=torch.float16, device=DEVICE)[..., :64]
    _, k, v = qkv(p)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("error")
        warnings.filterwarnings("ignore", category=RuntimeWarning, module="triton")
        warnings.filterwarnings("always", category=DispatchWarning)
        out = flashtune.attention(q_odd, k, v)
    assert check_case(out, None, q_odd, k, v, False) is None
    assert len(caught) == 1 and "tma" in str(caught[0].message)
    # The winner still serves the calls it can run.
    assert dispatch.attention_choice(p).config.as_dict() == tuned
    q, k, v = qkv(p)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        warnings.filterwarnings("ignore", category=RuntimeWarning, module="triton")
        assert check_case(flashtune.attention(q, k, v), None, q, k, v, False) is None


def test_a_misfit_notice_raised_under_w_error_keeps_the_tuned_winner(fresh_db, monkeypatch):
    # Defect (audit): with every warning an error (python -W error, no DispatchWarning filter)
    # the per-call notice "chosen config cannot run (tma: ...)" raised inside the dispatcher's
    # try, which took it for a failure of the tuned config: the user got "the tuned config ...
    # failed (DispatchWarning: ...)" and the winner was rejected for the whole device, so later
    # calls it can run silently took the default config.
    if "tma" not in attention_ops.triton_features():
        pytest.skip("this Triton has no tensor descriptors")
    p = problem(nq=32, nk=32, d=64)
    tuned = config(BLOCK_M=32, BLOCK_N=32, tma=True)
    seed(fresh_db, p, tuned)
    from flashtune import once

    monkeypatch.setattr(once, "_said", {})  # the notice is once per process
    q_odd = torch.randn(1, 2, 32, 68, dtype=torch.float16, device=DEVICE)[..., :64]
    _, k, v = qkv(p)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        warnings.filterwarnings("ignore", category=RuntimeWarning, module="triton")
        with pytest.raises(DispatchWarning, match="^flashtune attention: chosen config cannot run"):
            flashtune.attention(q_odd, k, v)
    assert dispatch.attention_choice(p).config.as_dict() == tuned
