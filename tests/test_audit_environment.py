"""Hostile environments end to end: what the winner database and the CLI do with them."""

from __future__ import annotations

import pytest

from flashtune.cache import CacheWarning, DeviceInfo, TuneDB
from test_cache_support import DEV, FAMILY, KEY, row_config


def test_export_skips_rows_that_import_would_refuse(tmp_path):
    # upsert_winner stores a device name longer than its column in SQLite (PostgreSQL would
    # refuse it); export wrote that row, and import then refused the whole file, good rows too
    source, target = tmp_path / "a.sqlite", tmp_path / "b.sqlite"
    long_name = DeviceInfo("x" * 201, DEV.capability, DEV.sm_count, DEV.triton_version)
    with TuneDB(str(source)) as db:
        for device in (DEV, long_name):
            db.upsert_winner(device, FAMILY, KEY, row_config(), median_ms=1.0, p20_ms=1.0,
                             p80_ms=1.0, trials=1)
    export = tmp_path / "winners.json"
    with pytest.warns(CacheWarning, match="201 characters, at most 200"):
        with TuneDB(str(source), read_only=True) as db:
            assert db.export_json(export) == 1
    with TuneDB(str(target)) as db:
        assert db.import_json(export) == 1
        assert [w.device for w in db.winners()] == [DEV]
