"""Shared fixtures of the dispatcher tests: a private database per test and seeding helpers."""

from __future__ import annotations

import os

import pytest
import torch

import flashtune.dispatch as dispatch
from flashtune.cache import DeviceInfo, ProblemKey, TuneDB
from flashtune.gen import attention_space, template_family_hash
from flashtune.gen.softmax_space import SoftmaxProblem, problem_bucket

DEVICE = "cuda" if torch.cuda.is_available() else "cpu"


@pytest.fixture
def fresh_db(tmp_path, monkeypatch):
    """FLASHTUNE_DB -> a new SQLite file (not created yet); dispatcher state reset around."""
    path = tmp_path / "tuned.sqlite"
    monkeypatch.setenv("FLASHTUNE_DB", f"sqlite:///{path}")
    for name in ("FLASHTUNE_DISABLE", "FLASHTUNE_LOG"):
        monkeypatch.delenv(name, raising=False)
    dispatch.reset()
    yield path
    monkeypatch.undo()
    dispatch.reset()  # later tests (in other files too) see the session's environment again


def row_config(block: int, rows: int = 1, warps: int = 1, fwd: bool = True, **extra) -> dict:
    cfg = dict(regime="row", block=block, rows_per_program=rows, splits=1, num_warps=warps,
               num_stages=1, lane_stats=False, l2_hint=False, align=False)
    if fwd:
        cfg["exp2"] = False
        cfg["max_pass"] = False
        cfg["resident"] = 0
        cfg["fused"] = False
        cfg["programs_per_sm"] = 0
        cfg["paired_loads"] = False
        cfg["vector_stats"] = False
    cfg.update(extra)
    return cfg


def seed(path, op: str, dtype: str, shape: tuple[int, int], config: dict, *,
         family_hash: str | None = None, median_ms: float = 0.01) -> ProblemKey:
    """Store one winner for the bucket of ``shape`` on this machine's device."""
    device = DeviceInfo.current(torch.device(DEVICE))
    key = ProblemKey.make(op, dtype, problem_bucket(SoftmaxProblem(shape[0], shape[1], dtype)))
    with TuneDB(f"sqlite:///{path}") as db:
        db.upsert_winner(device, family_hash or template_family_hash(op), key, config,
                         median_ms=median_ms, p20_ms=median_ms * 0.9, p80_ms=median_ms * 1.1,
                         trials=3)
    return key


def seed_attention(path, p: attention_space.AttentionProblem, config: dict, *,
                   family_hash: str | None = None) -> ProblemKey:
    """Store one attention winner for the bucket of ``p`` on this machine's device."""
    device = DeviceInfo.current(torch.device(DEVICE))
    key = ProblemKey.make("attention_fwd", p.dtype, attention_space.problem_bucket(p))
    with TuneDB(f"sqlite:///{path}") as db:
        db.upsert_winner(device, family_hash or template_family_hash("attention_fwd"), key,
                         config, median_ms=0.01, p20_ms=0.009, p80_ms=0.011, trials=3)
    return key


def sm_count() -> int:
    return DeviceInfo.current(torch.device(DEVICE)).sm_count


def interpreter() -> bool:
    return os.environ.get("TRITON_INTERPRET", "0") not in ("", "0")
