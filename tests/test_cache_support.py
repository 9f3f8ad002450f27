"""Shared fixtures and data of the cache tests (no tests here).

Backends: SQLite always; PostgreSQL when FLASHTUNE_TEST_PG_URL is set (``eval "$(bash
.ci/postgres.sh)"``), each test in a fresh schema that is dropped afterwards.
"""

from __future__ import annotations

import os
import uuid

import pytest

from flashtune.cache import DeviceInfo, ProblemKey

PG_URL = os.environ.get("FLASHTUNE_TEST_PG_URL")
_NO_PG = "FLASHTUNE_TEST_PG_URL is not set: run eval \"$(bash .ci/postgres.sh)\" to test PostgreSQL"
BACKENDS = [
    pytest.param("sqlite", id="sqlite"),
    pytest.param("postgresql", id="postgresql", marks=pytest.mark.skipif(not PG_URL, reason=_NO_PG)),
]

DEV = DeviceInfo("NVIDIA H100 80GB HBM3", "9.0", 132, "3.6.0")
OTHER_DEV = DeviceInfo("NVIDIA A100-SXM4-80GB", "8.0", 108, "3.6.0")
FAMILY = "f" * 16  # a family hash as flashtune writes them, not today's
KEY = ProblemKey.make("softmax", "float16", {"rows_bucket": 4096, "cols_bucket": 4096})


def row_config(block: int = 4096, warps: int = 8, **over) -> dict:
    """A valid forward-softmax config of the row regime."""
    cfg = dict(regime="row", block=block, rows_per_program=1, splits=1, num_warps=warps,
               num_stages=1, lane_stats=False, l2_hint=False, exp2=True, max_pass=False, resident=0, align=False,
               fused=False, programs_per_sm=0, paired_loads=False, vector_stats=False)
    cfg.update(over)
    return cfg


def key_for(rows: int, cols: int = 4096, op: str = "softmax", dtype: str = "float16") -> ProblemKey:
    return ProblemKey.make(op, dtype, {"rows_bucket": rows, "cols_bucket": cols})


@pytest.fixture(params=BACKENDS)
def db_url(request, tmp_path):
    """A database URL no other test uses (SQLite file in tmp_path, or a fresh PG schema)."""
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'tuned.sqlite'}"
        return
    from sqlalchemy import create_engine
    from sqlalchemy.engine import make_url
    from sqlalchemy.schema import CreateSchema, DropSchema

    schema = "ft_test_" + uuid.uuid4().hex[:16]
    admin = create_engine(PG_URL)
    with admin.begin() as conn:
        conn.execute(CreateSchema(schema))
    url = make_url(PG_URL).update_query_dict({"options": f"-csearch_path={schema}"})
    try:
        yield url.render_as_string(hide_password=False)
    finally:
        with admin.begin() as conn:
            conn.execute(DropSchema(schema, cascade=True))
        admin.dispose()


@pytest.fixture
def sqlite_url(tmp_path):
    return f"sqlite:///{tmp_path / 'tuned.sqlite'}"


def unsearchable(monkeypatch, path) -> None:
    """os.stat of ``path`` fails as in a folder this user may not search (another user's
    0o700 folder): the tests run as root, to whom every folder is searchable."""
    real_stat = os.stat

    def stat_(target, *args, **kwargs):
        if os.fspath(target) == str(path):
            raise PermissionError(13, "Permission denied", str(target))
        return real_stat(target, *args, **kwargs)

    monkeypatch.setattr(os, "stat", stat_)


def raw_engine(url: str):
    """A plain engine (none of TuneDB's settings), to tamper with tables behind its back."""
    from sqlalchemy import create_engine

    return create_engine(url)
