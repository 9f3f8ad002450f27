"""The winner database: round trips, the upsert rules, trials, JSON transfer, the CLI."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import warnings
from datetime import datetime, timedelta, timezone

import pytest
import torch

from flashtune.cache import (CacheWarning, DeviceInfo, ProblemKey, TuneDB, Trial, Winner,
                             read_runtime_winners)
from flashtune.cache.keys import canonical_json
from flashtune.cli import main as cli_main
from flashtune.gen import ConfigError
from test_cache_support import (DEV, FAMILY, KEY, OTHER_DEV, db_url, key_for,  # noqa: F401
                                row_config, sqlite_url)


def _store(db, config=None, median=1.0, key=KEY, device=DEV, trials=10):
    return db.upsert_winner(device, FAMILY, key, config or row_config(), median_ms=median,
                            p20_ms=median * 0.9, p80_ms=median * 1.1, trials=trials)


def test_round_trip(db_url):
    before = datetime.now(timezone.utc)
    with TuneDB(db_url) as db:
        assert _store(db, row_config(warps=16), median=0.25, trials=7) is True
        got = db.winner(DEV, FAMILY, KEY)
    assert isinstance(got, Winner)
    assert got.device == DEV and got.family_hash == FAMILY and got.key == KEY
    assert got.config == row_config(warps=16)
    assert (got.median_ms, got.p20_ms, got.p80_ms, got.trials) == (0.25, 0.25 * 0.9, 0.25 * 1.1, 7)
    assert got.flashtune_version == __import__("flashtune").__version__
    assert got.tuned_at.tzinfo is not None
    assert before - timedelta(seconds=1) <= got.tuned_at <= datetime.now(timezone.utc) + timedelta(seconds=1)
    # a new connection sees the same
    with TuneDB(db_url) as db:
        assert db.winners() == [got]
        assert db.winner(DEV, FAMILY, key_for(8192)) is None
        assert db.winner(DEV, "other-family", KEY) is None


def test_generic_bucket_round_trip(db_url):
    """Any op family's bucket (ints, strings, flags) is part of the key, order-insensitive."""
    bucket = {"head_dim": 128, "nq_bucket": 2048, "nk_bucket": 2048, "bh_bucket": 64,
              "causal": True, "kv_ratio": 4, "layout": "bhsd"}
    key = ProblemKey.make("softmax", "bfloat16,float32", bucket)
    same = ProblemKey.make("softmax", "bfloat16,float32", dict(reversed(list(bucket.items()))))
    flipped = ProblemKey.make("softmax", "bfloat16,float32", {**bucket, "causal": False})
    assert key == same and key != flipped
    with TuneDB(db_url) as db:
        _store(db, key=key, median=1.0)
        _store(db, key=flipped, median=2.0)
        assert db.winner(DEV, FAMILY, same).median_ms == 1.0
        assert db.winner(DEV, FAMILY, flipped).median_ms == 2.0
        assert db.winner(DEV, FAMILY, same).key.bucket_dict() == bucket


def test_faster_replaces_slower_and_slower_does_not(db_url):
    with TuneDB(db_url) as db:
        assert _store(db, row_config(warps=8), median=2.0) is True
        assert _store(db, row_config(warps=16), median=1.0) is True  # faster: replaces
        assert db.winner(DEV, FAMILY, KEY).config == row_config(warps=16)
        assert _store(db, row_config(warps=4), median=1.5) is False  # slower: kept out
        assert _store(db, row_config(warps=16), median=3.0) is False  # same config re-measured slower
        got = db.winner(DEV, FAMILY, KEY)
        assert (got.config, got.median_ms) == (row_config(warps=16), 1.0)


def test_replace_stores_a_slower_winner_and_is_a_bool(db_url):
    # The tuner's write: the stored median may come from another shape of the bucket, and the
    # tuner measured the stored config itself on the shape it tuned.
    with TuneDB(db_url) as db:
        assert _store(db, row_config(warps=16), median=1.0) is True
        assert db.upsert_winner(DEV, FAMILY, KEY, row_config(warps=4), median_ms=2.0,
                                p20_ms=2.0, p80_ms=2.0, trials=3, replace=True) is True
        got = db.winner(DEV, FAMILY, KEY)
        assert (got.config, got.median_ms, got.trials) == (row_config(warps=4), 2.0, 3)
        with pytest.raises(TypeError, match="replace must be True or False"):
            db.upsert_winner(DEV, FAMILY, KEY, row_config(warps=4), median_ms=2.0,
                             p20_ms=2.0, p80_ms=2.0, trials=3, replace="yes")



def test_replace_keeps_a_faster_row_another_writer_stored_meanwhile(db_url):
    """Two tuners on one bucket: each reads the stored winner (here S0, or none), measures it
    with its own configs, and stores its pick with replace. Was: the last write won, so a
    slower winner written second replaced the faster one stored in between. Now replace
    applies only while the stored row is the one the writer read (``if_stored``); a row
    another writer stored meanwhile is kept unless the new one is faster."""
    def tuned(config, median, seen):
        return db.upsert_winner(DEV, FAMILY, KEY, config, median_ms=median, p20_ms=median,
                                p80_ms=median, trials=3, replace=True, if_stored=seen)

    s0, a, b = row_config(warps=4), row_config(warps=8), row_config(warps=16)
    with TuneDB(db_url) as db:
        assert _store(db, s0, median=1.0) is True  # an earlier run's winner
        assert tuned(b, 2.0, s0) is True  # tuner B: S0 still there, replaced (slower or not)
        assert tuned(a, 3.0, s0) is False  # tuner A read S0 too: B's faster row stays
        got = db.winner(DEV, FAMILY, KEY)
        assert (got.config, got.median_ms) == (b, 2.0)
        assert tuned(a, 1.5, s0) is True  # faster than B's: stored
        assert db.winner(DEV, FAMILY, KEY).config == a
        assert tuned(b, 5.0, a) is True  # a tuner that read A's row replaces it, slower or not
        db.clear()
        assert tuned(b, 2.0, None) is True  # none stored, none read: stored
        assert tuned(a, 3.0, None) is False  # read none, B stored meanwhile: B's faster row stays
        assert db.winner(DEV, FAMILY, KEY).config == b
        with pytest.raises(ConfigError):
            tuned(a, 1.0, {"num_warps": "x"})  # a config outside the space, as for ``config``

def test_equal_times_resolve_the_same_whatever_the_order(db_url):
    configs = [row_config(warps=w) for w in (4, 8, 16, 32)]
    expected = min(configs, key=canonical_json)
    seen = []
    with TuneDB(db_url) as db:
        for order in (configs, configs[::-1], configs[1:] + configs[:1]):
            db.clear()
            for cfg in order:
                _store(db, cfg, median=1.0)
            seen.append(db.winner(DEV, FAMILY, KEY).config)
    assert seen == [expected] * 3


def test_devices_are_kept_apart(db_url):
    with TuneDB(db_url) as db:
        _store(db, median=1.0, device=DEV)
        _store(db, median=5.0, device=OTHER_DEV)
        _store(db, median=2.0, device=DEV, key=key_for(1024))
        assert {w.median_ms for w in db.winners(DEV)} == {1.0, 2.0}
        assert [w.median_ms for w in db.winners(OTHER_DEV)] == [5.0]
        assert len(db.winners()) == 3
        assert db.clear(OTHER_DEV) == 1
        assert db.winners(OTHER_DEV) == [] and len(db.winners(DEV)) == 2


def test_trials_keep_every_measured_config(db_url):
    with TuneDB(db_url) as db:
        for w, ms in ((4, 3.0), (8, 2.0), (16, 1.0)):
            db.record_trial(DEV, FAMILY, KEY, row_config(warps=w), median_ms=ms, p20_ms=ms * 0.9,
                            p80_ms=ms * 1.2)
        db.record_trial(DEV, FAMILY, KEY, row_config(warps=32), error="out of resources: shared memory")
        db.record_trial(DEV, FAMILY, KEY, row_config(warps=4), median_ms=2.5)  # re-measured: replaces
        db.record_trial(DEV, FAMILY, key_for(8), row_config(warps=4), median_ms=9.0)  # another key
        trials = db.trials(DEV, FAMILY, KEY)
    assert all(isinstance(t, Trial) for t in trials)
    by_warps = {t.config["num_warps"]: t for t in trials}
    assert sorted(by_warps) == [4, 8, 16, 32]
    assert by_warps[4].median_ms == 2.5 and by_warps[4].p20_ms is None
    assert by_warps[16].status == "ok" and by_warps[16].p80_ms == pytest.approx(1.2)
    failed = by_warps[32]
    assert failed.status == "failed" and failed.median_ms is None and "shared memory" in failed.error
    assert failed.measured_at.tzinfo is not None


@pytest.mark.parametrize("bad, error", [
    (dict(config=row_config(block=3)), ConfigError),  # outside the space
    (dict(config={**row_config(), "evil": 1}), ConfigError),  # unknown key
    (dict(config=row_config(num_warps=True)), ConfigError),  # bool is not an int
    (dict(median_ms=float("nan")), ValueError),
    (dict(median_ms=-1.0), ValueError),
    (dict(median_ms="1.0"), TypeError),
    (dict(p20_ms=5.0), ValueError),  # p20 > median
    (dict(trials=0), ValueError),
    (dict(device="H100"), TypeError),
    (dict(key=("softmax", "float16")), TypeError),
    (dict(key=ProblemKey.make("no_such_op", "float16", {"b": 1})), ValueError),
])
def test_bad_winner_input_is_refused(sqlite_url, bad, error):
    args = dict(device=DEV, key=KEY, config=row_config(), median_ms=1.0, p20_ms=0.9,
                p80_ms=1.1, trials=3)
    args.update(bad)
    with TuneDB(sqlite_url) as db:
        with pytest.raises(error):
            db.upsert_winner(args["device"], FAMILY, args["key"], args["config"],
                             median_ms=args["median_ms"], p20_ms=args["p20_ms"],
                             p80_ms=args["p80_ms"], trials=args["trials"])
        assert db.winners() == []


def test_bad_trial_input_is_refused(sqlite_url):
    with TuneDB(sqlite_url) as db:
        with pytest.raises(TypeError, match="median_ms"):
            db.record_trial(DEV, FAMILY, KEY, row_config())  # neither a time nor an error
        with pytest.raises(ConfigError):
            db.record_trial(DEV, FAMILY, KEY, row_config(block=3), median_ms=1.0)
        with pytest.raises(TypeError, match="error"):
            db.record_trial(DEV, FAMILY, KEY, row_config(), error=RuntimeError("x"))
        assert db.trials(DEV, FAMILY, KEY) == []


@pytest.mark.parametrize("bad, error", [(dict(sm_count=True), TypeError),
                                        (dict(sm_count=0), ValueError), (dict(name=""), TypeError),
                                        (dict(capability=9.0), TypeError)])
def test_device_info_checks_its_fields(bad, error):
    fields = dict(name="H100", capability="9.0", sm_count=132, triton_version="3.6.0")
    fields.update(bad)
    with pytest.raises(error):
        DeviceInfo(**fields)


def test_problem_key_checks_bucket_values():
    with pytest.raises(TypeError, match="rows_bucket"):
        ProblemKey.make("softmax", "float16", {"rows_bucket": 1.5})
    with pytest.raises(ValueError, match="sorted"):
        ProblemKey("softmax", "float16", (("b", 1), ("a", 2)))


@pytest.mark.skipif(torch.cuda.is_available(), reason="the interpreter's device: no GPU here")
def test_device_info_current_without_gpu():
    info = DeviceInfo.current()  # without a GPU, the tests run on the CPU (interpreter)
    assert info.name == "triton-interpreter" and info.capability == "cpu" and info.sm_count >= 1
    assert info.triton_version


def test_export_import_round_trip(db_url, tmp_path):
    path = tmp_path / "winners.json"
    with TuneDB(db_url) as db:
        _store(db, row_config(warps=16), median=1.0)
        _store(db, row_config(warps=8), median=2.0, key=key_for(64), device=OTHER_DEV)
        originals = db.winners()
        assert db.export_json(path) == 2
        assert db.export_json(tmp_path / "one.json", device=OTHER_DEV) == 1
        db.clear()
        assert db.import_json(path) == 2
        assert db.winners() == originals  # tuned_at and flashtune_version carried over
        assert db.import_json(path) == 0  # not faster than what is stored
    document = json.loads(path.read_text())
    assert document["format"] == "flashtune-winners" and len(document["winners"]) == 2


def test_import_keeps_the_faster_rule(sqlite_url, tmp_path):
    path = tmp_path / "w.json"
    with TuneDB(sqlite_url) as db:
        _store(db, row_config(warps=16), median=1.0)
        db.export_json(path)
        db.clear()
        _store(db, row_config(warps=4), median=0.5)
        assert db.import_json(path) == 0
        assert db.winner(DEV, FAMILY, KEY).config == row_config(warps=4)


def _exported(tmp_path, url) -> dict:
    with TuneDB(url) as db:
        _store(db, row_config(warps=16), median=1.0)
        _store(db, row_config(warps=8), median=2.0, key=key_for(64))
        db.export_json(tmp_path / "good.json")
        db.clear()
    return json.loads((tmp_path / "good.json").read_text())


@pytest.mark.parametrize("tamper, reason", [
    (lambda r: r["config"].update(block="64; import os"), "block must be of type int"),
    (lambda r: r["config"].update(block=48), "outside the space"),
    (lambda r: r["config"].update(evil=1), "unknown keys"),
    (lambda r: r["config"].pop("regime"), "missing keys"),
    (lambda r: r.update(op="rm -rf"), "unknown op"),
    (lambda r: r.update(extra=1), "unknown fields"),
    (lambda r: r.pop("trials"), "missing fields"),
    (lambda r: r["device"].update(sm_count="132"), "sm_count"),
    (lambda r: r.update(median_ms="fast"), "median_ms"),
    (lambda r: r.update(p80_ms=0.1), "p20_ms <= median_ms <= p80_ms"),
    # an integer past float's range: was an OverflowError traceback (exit 1)
    (lambda r: r.update(p80_ms=10**400), "p80_ms must be a finite time > 0 ms"),
    (lambda r: r.update(trials=2.5), "trials must be an int"),
    (lambda r: r.update(tuned_at="yesterday"), "isoformat"),
    (lambda r: r.update(bucket=[1, 2]), "bucket must be an object"),
    # text the database could not store as given: named here, not failing inside the database
    (lambda r: r["device"].update(name="H\ud800100"), "device.name: not valid Unicode"),
    (lambda r: r["device"].update(name="x" * 201), "device.name: 201 characters, at most 200"),
    (lambda r: r.update(flashtune_version="0.1\x00"), "flashtune_version: contains a NUL"),
    (lambda r: r.update(flashtune_version="9" * 65), "flashtune_version: 65 characters"),
])
def test_import_rejects_bad_rows(db_url, tmp_path, tamper, reason):
    document = _exported(tmp_path, db_url)
    tamper(document["winners"][1])
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(document))
    with TuneDB(db_url) as db:
        with pytest.raises(ValueError) as caught:
            db.import_json(bad)
        assert db.winners() == []  # one bad row: nothing imported
    message = str(caught.value)
    assert "winners[1]" in message and "winners[0]" not in message and str(bad) in message
    assert reason in message


@pytest.mark.parametrize("content, reason", [
    ("not json", "not a JSON file"),
    (json.dumps({"winners": []}), "not a flashtune winners export"),
    (json.dumps({"format": "flashtune-winners", "schema_version": 99, "winners": []}), "version 99"),
    (json.dumps({"format": "flashtune-winners", "schema_version": 1, "winners": {}}), "must be a list"),
    # true == 1 and 1.0 == 1 in Python: the version must be the integer itself
    (json.dumps({"format": "flashtune-winners", "schema_version": True, "winners": []}),
     "must be an integer .*, got True"),
    (json.dumps({"format": "flashtune-winners", "schema_version": 1.0, "winners": []}),
     "must be an integer .*, got 1.0"),
    # was: "written with winners schema version '1'; this flashtune reads version 1"
    (json.dumps({"format": "flashtune-winners", "schema_version": "1", "winners": []}),
     "\"schema_version\" must be an integer .*, got '1'"),
    ('{"format": "flashtune-winners", "schema_version": ' + "1" * 5000 + "}", "not a JSON file"),
])
def test_import_rejects_bad_files(sqlite_url, tmp_path, content, reason):
    path = tmp_path / "x.json"
    path.write_text(content)
    with TuneDB(sqlite_url) as db, pytest.raises(ValueError, match=reason):
        db.import_json(path)


def test_import_takes_a_file_that_starts_with_a_utf8_bom(sqlite_url, tmp_path):
    """As Windows editors save UTF-8: it was refused with "Unexpected UTF-8 BOM"."""
    with TuneDB(sqlite_url) as db:
        _store(db, row_config(warps=16), median=1.0)
        out = tmp_path / "w.json"
        db.export_json(out)
    out.write_bytes(b"\xef\xbb\xbf" + out.read_bytes())
    other = f"sqlite:///{tmp_path / 'other.sqlite'}"
    with TuneDB(other) as db:
        assert db.import_json(out) == 1
        assert [w.config for w in db.winners()] == [row_config(warps=16)]


def test_cli_export_and_import(sqlite_url, tmp_path, monkeypatch, capsys):
    other = f"sqlite:///{tmp_path / 'other.sqlite'}"
    with TuneDB(sqlite_url) as db:
        _store(db, row_config(warps=16), median=1.0)
    monkeypatch.setenv("FLASHTUNE_DB", sqlite_url)
    out = tmp_path / "w.json"
    assert cli_main(["export", str(out)]) == 0
    assert "exported 1 winner" in capsys.readouterr().err
    assert cli_main(["import", str(out), "--db", other]) == 0
    assert "imported 1 winner" in capsys.readouterr().err
    with TuneDB(other) as db:
        assert [w.config for w in db.winners()] == [row_config(warps=16)]
    document = json.loads(out.read_text())
    document["winners"][0]["config"]["block"] = "64; import os"
    out.write_text(json.dumps(document))
    assert cli_main(["import", str(out), "--db", other]) == 2
    err = capsys.readouterr().err
    assert "flashtune import: error:" in err and "winners[0]" in err and "block" in err


@pytest.mark.parametrize("family", [FAMILY, "F" * 16, "edited"])
def test_cli_import_names_rows_of_another_family(sqlite_url, tmp_path, monkeypatch, capsys,
                                                 family):
    """Rows tuned by another flashtune version (another family hash: other templates or
    tunables) are imported, kept and listed, but never served: import says how many. So are
    rows whose hash was edited (review: a hash not of flashtune's form went unmentioned)."""
    from flashtune.gen import template_family_hash

    other_key = ProblemKey.make("softmax", "float16", {"rows_bucket": 8192, "cols_bucket": 4096})
    with TuneDB(sqlite_url) as db:
        db.upsert_winner(DEV, family, KEY, row_config(warps=16), median_ms=1.0, p20_ms=0.9,
                         p80_ms=1.1, trials=10)  # not today's hash
        db.upsert_winner(DEV, template_family_hash("softmax"), other_key, row_config(),
                         median_ms=1.0, p20_ms=0.9, p80_ms=1.1, trials=3)
    monkeypatch.setenv("FLASHTUNE_DB", sqlite_url)
    out = tmp_path / "w.json"
    assert cli_main(["export", str(out)]) == 0
    capsys.readouterr()
    assert cli_main(["import", str(out), "--db", f"sqlite:///{tmp_path / 'new.sqlite'}"]) == 0
    err = capsys.readouterr().err
    assert "imported 2 winner" in err
    assert "1 row(s)" in err and "other templates or tunables" in err and "not served" in err


def test_import_counts_one_winner_per_problem_of_the_file(sqlite_url, tmp_path, capsys):
    """Defect: two rows of one problem in a file, the slower first, were both counted as
    imported ("imported 2 winner(s)") while the database holds one. The faster-wins rule picks
    one row per problem, whatever the order; the rest are counted as superseded."""
    with TuneDB(sqlite_url) as db:
        _store(db, row_config(warps=16), median=2.0)
        out = tmp_path / "w.json"
        db.export_json(out)
    document = json.loads(out.read_text())
    faster = json.loads(json.dumps(document["winners"][0]))
    faster.update(median_ms=1.0, p20_ms=0.9, p80_ms=1.1)
    faster["config"]["num_warps"] = 8
    document["winners"].append(faster)  # the slower row first, then the faster
    out.write_text(json.dumps(document))
    target = f"sqlite:///{tmp_path / 'new.sqlite'}"
    with TuneDB(target) as db:
        assert db.import_json(out) == 1
        assert [(w.config, w.median_ms) for w in db.winners()] == [(row_config(warps=8), 1.0)]
    assert cli_main(["import", str(out), "--db", f"sqlite:///{tmp_path / 'cli.sqlite'}"]) == 0
    err = capsys.readouterr().err
    assert "imported 1 winner(s)" in err
    assert f"1 row(s) of {out} repeat the problem of another row" in err
    assert "2 row(s)" not in err  # the stale note counts the rows it keeps, one


def test_cli_import_refused_leaves_no_database_behind(tmp_path, capsys):
    # a refused import used to create the database file (and its folders) before checking
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"format": "flashtune-winners", "schema_version": 99, "winners": []}))
    target = tmp_path / "deep" / "new.sqlite"
    for source in (bad, tmp_path / "missing.json"):
        assert cli_main(["import", str(source), "--db", f"sqlite:///{target}"]) == 2
        assert "flashtune import: error:" in capsys.readouterr().err
        assert not (tmp_path / "deep").exists()


def test_default_database_lives_in_the_cache_folder(tmp_path, monkeypatch):
    monkeypatch.delenv("FLASHTUNE_DB", raising=False)
    monkeypatch.setenv("FLASHTUNE_CACHE_DIR", str(tmp_path / "cache"))
    with TuneDB() as db:
        _store(db)
        assert db.url == f"sqlite:///{tmp_path / 'cache' / 'tuned.sqlite'}"
    assert (tmp_path / "cache" / "tuned.sqlite").is_file()
    monkeypatch.setenv("FLASHTUNE_DB", f"sqlite:///{tmp_path / 'team.sqlite'}")
    with TuneDB() as db:
        assert db.winners() == []
    assert (tmp_path / "team.sqlite").is_file()
    with pytest.raises(ValueError, match="not supported"):
        TuneDB("mysql://u@h/db")


def test_sqlite_connection_settings(sqlite_url):
    with TuneDB(sqlite_url, timeout=7) as db:
        with db._engine.connect() as conn:
            assert conn.exec_driver_sql("PRAGMA journal_mode").scalar() == "wal"
            assert conn.exec_driver_sql("PRAGMA synchronous").scalar() == 1  # NORMAL
            assert conn.exec_driver_sql("PRAGMA busy_timeout").scalar() == 7000


def test_runtime_read_returns_winners_of_the_device(db_url):
    with TuneDB(db_url) as db:
        _store(db, median=1.0, device=DEV)
        _store(db, median=2.0, device=OTHER_DEV)
    with warnings.catch_warnings():
        warnings.simplefilter("error", CacheWarning)
        got = read_runtime_winners(DEV, db_url)
    assert [(w.device, w.median_ms) for w in got] == [(DEV, 1.0)]


def test_importing_the_cache_stays_light():
    code = ("import sys, flashtune.cache; "
            "print(sorted(m for m in ('torch', 'optuna', 'psycopg2') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_export_is_on_disk_before_it_replaces_the_file(sqlite_url, tmp_path, monkeypatch):
    """The export is fsync-ed before os.replace puts it in place: renamed unsynced, a crash
    soon after could leave an empty or partial file where the previous export was (a rename
    can reach the disk before the data), and the export is a file people carry elsewhere."""
    path = tmp_path / "w.json"
    path.write_text("previous export\n")
    synced, real_fsync, real_replace = [], os.fsync, os.replace

    def fsync(fd):
        synced.append(os.fstat(fd).st_size)  # what the file held when it was synced
        real_fsync(fd)

    def replace(src, dst):
        assert synced, "os.replace before os.fsync"
        real_replace(src, dst)

    monkeypatch.setattr(os, "fsync", fsync)
    monkeypatch.setattr(os, "replace", replace)
    with TuneDB(sqlite_url) as db:
        _store(db, row_config(warps=16), median=1.0)
        assert db.export_json(path) == 1
    assert synced == [path.stat().st_size]  # the whole document, flushed before the sync
    assert len(json.loads(path.read_text())["winners"]) == 1
