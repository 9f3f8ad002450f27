"""Audit of the tuned-winner cache and the runtime dispatcher, as a user's model meets them.

A broken cache must never crash a model: the dispatcher falls back to default configs and says
so once. Stored values reach no template unless validate_config accepts them. Bad arguments are
ValueError/TypeError naming the argument; the CLI answers a broken database with one line and a
non-zero exit code. CPU only (Triton's interpreter, tests/conftest.py).
"""

from __future__ import annotations

import json
import os
import sqlite3
import warnings

import pytest
import torch

import flashtune
import flashtune.dispatch as dispatch
import flashtune.dispatch.plans as plans
from attention_cases import config as attention_config
from cli_helpers import run_cli
from dispatch_helpers import DEVICE, fresh_db, row_config, seed, seed_attention  # noqa: F401
from flashtune.cache import CacheWarning
from flashtune.cache.engine import resolve_url
from flashtune.dispatch import DispatchWarning
from flashtune.gen import attention_ops
from flashtune.gen.attention_space import AttentionProblem

pytestmark = [pytest.mark.filterwarnings("ignore::RuntimeWarning:triton"),
              pytest.mark.filterwarnings("ignore:invalid value encountered:RuntimeWarning")]


def _ours(caught) -> list[str]:
    return [str(w.message) for w in caught if issubclass(w.category, (CacheWarning, DispatchWarning))]


# -- a tuned config that fails to run: one warning, one attempt, whatever the shapes ------------

def test_failing_tuned_softmax_config_warns_once_across_shapes(fresh_db, monkeypatch):
    # Defect: each new shape of the bucket retried the broken config (a compile per shape on a
    # GPU) and warned again, so a model with changing sequence lengths warned on every call.
    seed(fresh_db, "softmax", "float32", (8, 64), row_config(64, rows=2))
    # decided (not run) before the failure: that decision must not keep the broken config
    assert dispatch.choice("softmax", (7, 60), "float32", DEVICE).how == "exact"
    real, attempts = plans.load_variant, []

    def picky(op, config):
        if config["rows_per_program"] == 2:
            attempts.append(op)
            raise RuntimeError("out of resources (simulated)")
        return real(op, config)

    monkeypatch.setattr(plans, "load_variant", picky)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for shape in ((6, 33), (6, 40), (5, 50), (7, 60), (8, 64)):
            x = torch.randn(shape, device=DEVICE)
            for _ in range(2):
                torch.testing.assert_close(flashtune.softmax(x), torch.softmax(x, -1))
    said = _ours(caught)
    assert len(said) == 1 and "out of resources" in said[0], said
    assert attempts == ["softmax"]
    assert dispatch.choice("softmax", (8, 48), "float32", DEVICE).how == "default"


def test_failing_tuned_attention_config_warns_once_across_shapes(fresh_db, monkeypatch):
    seed_attention(fresh_db, AttentionProblem(1, 2, 2, 32, 32, 32, False, "float16"),
                   attention_config(BLOCK_M=16, BLOCK_N=16))
    real, attempts = attention_ops.run_variant, []

    def picky(op, cfg, *args):
        if cfg["BLOCK_M"] == 16:
            attempts.append(op)
            raise RuntimeError("out of resources (simulated)")
        return real(op, cfg, *args)

    monkeypatch.setattr(attention_ops, "run_variant", picky)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for n in (20, 24, 30):  # one bucket (32)
            q, k, v = (torch.randn(1, 2, n, 32, device=DEVICE, dtype=torch.float16) for _ in "qkv")
            expected = torch.nn.functional.scaled_dot_product_attention(q.float(), k.float(), v.float())
            torch.testing.assert_close(flashtune.attention(q, k, v).float(), expected,
                                       atol=2e-2, rtol=2e-2)
    said = _ours(caught)
    assert len(said) == 1 and "out of resources" in said[0], said
    assert len(attempts) == 1


def test_attention_falls_back_when_another_thread_rejected_the_config_meanwhile(fresh_db, monkeypatch):
    """The fallback acts on the decision the failed attempt ran with: another thread rejecting
    the same config between the failure and the fallback (simulated inside the failing launch)
    must not turn the caller's call into the kernel's error."""
    seed_attention(fresh_db, AttentionProblem(1, 2, 2, 32, 32, 32, False, "float16"),
                   attention_config(BLOCK_M=16, BLOCK_N=16))
    real = attention_ops.run_variant
    other = AttentionProblem(1, 2, 2, 20, 20, 32, False, "float16")  # same bucket

    def picky(op, cfg, *args):
        if cfg["BLOCK_M"] == 16:
            dispatch.RUNTIME.dispatcher.reject(op, other, torch.device(DEVICE), cfg)
            raise RuntimeError("out of resources (simulated)")
        return real(op, cfg, *args)

    monkeypatch.setattr(attention_ops, "run_variant", picky)
    q, k, v = (torch.randn(1, 2, 30, 32, device=DEVICE, dtype=torch.float16) for _ in "qkv")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        out = flashtune.attention(q, k, v)
    expected = torch.nn.functional.scaled_dot_product_attention(q.float(), k.float(), v.float())
    torch.testing.assert_close(out.float(), expected, atol=2e-2, rtol=2e-2)


# -- tampered configs in the database: validated before use, one warning -----------------------

_GOOD = row_config(32, rows=2)


def _with(**changes) -> str:
    return json.dumps({**_GOOD, **changes})


@pytest.mark.parametrize("stored", [
    _with(num_warps="1"),                  # "1" for 1
    _with(num_warps=True),                 # True for 1 (bool is an int in Python)
    _with(num_warps=1.0),                  # 1.0 for 1
    _with(num_warps=float("nan")),         # json.dumps writes NaN, json.loads reads it
    _with(block=2 ** 40),                  # absurd block size
    _with(block=10 ** 400),                # beyond any machine integer
    _with(rows_per_program=-2),
    '{"regime": Infinity}',
    "[1, 2]", "null", '"row"', "7", "",
    _with(evil=1),
], ids=["str", "bool", "float", "nan", "absurd-block", "huge-int", "negative", "infinity",
        "array", "null", "string", "number", "empty", "unknown-key"])
def test_tampered_config_falls_back_with_one_warning(fresh_db, stored):
    seed(fresh_db, "softmax", "float32", (4, 32), _GOOD)
    with sqlite3.connect(fresh_db) as conn:
        conn.execute("UPDATE ft_v1_winners SET config = ?", (stored,))
    conn.close()
    x = torch.randn(4, 32, device=DEVICE)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for _ in range(4):
            torch.testing.assert_close(flashtune.softmax(x), torch.softmax(x, -1))
            torch.testing.assert_close(flashtune.softmax(x[:3]), torch.softmax(x[:3], -1))
        picked = dispatch.choice("softmax", (4, 32), "float32", DEVICE)
    assert picked.how == "default"
    said = _ours(caught)
    assert len(said) == 1 and "skipped 1 invalid winner row" in said[0], said


_SET_COLUMN = {  # one fixed statement per key column: no SQL built from strings
    "device_name": "UPDATE ft_v1_winners SET device_name = ?",
    "capability": "UPDATE ft_v1_winners SET capability = ?",
    "sm_count": "UPDATE ft_v1_winners SET sm_count = ?",
    "triton_version": "UPDATE ft_v1_winners SET triton_version = ?",
    "dtype": "UPDATE ft_v1_winners SET dtype = ?",
}


# Values no device running these tests has (an H100's name or a 9.0 capability would be this
# device's own on a Hopper machine).
@pytest.mark.parametrize("column, value", [
    ("device_name", "Some Other GPU"), ("capability", "7.5"), ("sm_count", 7),
    ("triton_version", "0.0.1"), ("dtype", "float16"),
])
def test_rows_of_another_device_or_triton_are_not_used(fresh_db, column, value):
    seed(fresh_db, "softmax", "float32", (4, 32), _GOOD)
    assert dispatch.choice("softmax", (4, 32), "float32", DEVICE).how == "exact"  # control
    with sqlite3.connect(fresh_db) as conn:
        conn.execute(_SET_COLUMN[column], (value,))
    conn.close()
    dispatch.reset()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert dispatch.choice("softmax", (4, 32), "float32", DEVICE).how == "default"
    assert _ours(caught) == []  # someone else's winners are not a problem to report


# -- database URLs: mistakes are named, at run time and on the command line --------------------

@pytest.mark.parametrize("url, reason", [
    ("postgresql://u:secret@host:abc/db", "not an SQLAlchemy database URL"),
    ("sqlite+://::::", "not an SQLAlchemy database URL"),
    ("", "empty"),
    ("sqlite:////tmp/x.sqlite?mode=ro&uri=true", "URI filenames"),
    # Defect: SQLite parameters other than mode=ro were ignored (pysqlite's own timeout, ...
    # overridden by flashtune's, the rest dropped with an SAWarning), and readers ignored all.
    ("sqlite:////tmp/x.sqlite?timeout=5", "'timeout' not supported"),
    ("sqlite:////tmp/x.sqlite?mode=ro&cache=shared", "'cache' not supported"),
    ("sqlite:////tmp/x.sqlite?mode=rw", "mode='rw' not supported"),
    ("sqlite:////tmp/x.sqlite?mode=ro&mode=ro", "not supported"),
    ("sqlite://?mode=ro", "mode=ro needs an SQLite file"),
    ("sqlite:///:memory:?mode=ro", "mode=ro needs an SQLite file"),
    # Defect: SQLAlchemy drops a parameter without a value, so ?mode= (a script's
    # ?mode=$MODE with MODE unset) opened the database writable, and a '?' in a file name
    # silently opened another file (/tmp/a for /tmp/a?b.sqlite).
    ("sqlite:////tmp/x.sqlite?mode=", "'mode' without a value"),
    ("sqlite:////tmp/x.sqlite?timeout", "'timeout' without a value"),
    ("sqlite:////tmp/a?b.sqlite", "'b.sqlite' without a value"),
    ("sqlite:////tmp/x.sqlite?mode=ro&cache", "'cache' without a value"),
])
def test_malformed_urls_are_value_errors_naming_url(url, reason):
    # Defects: a bad port leaked "invalid literal for int()"; "" meant the current folder;
    # uri=true made the tuner write one file while the runtime read another.
    with pytest.raises(ValueError, match=reason) as caught:
        resolve_url(url)
    assert str(caught.value).startswith("url: ")
    assert "secret" not in str(caught.value)


def test_blank_environment_value_is_unset(monkeypatch, tmp_path):
    monkeypatch.setenv("FLASHTUNE_CACHE_DIR", str(tmp_path))
    monkeypatch.setenv("FLASHTUNE_DB", "   ")
    assert resolve_url(None).database == str(tmp_path / "tuned.sqlite")


def test_blank_cache_dir_is_unset(monkeypatch, tmp_path):
    # Defect: FLASHTUNE_CACHE_DIR="  " (set but blank) was a relative folder named "  ": kernels
    # and the default database went under whatever folder the process ran in, while a blank
    # FLASHTUNE_DB already meant "unset".
    from flashtune import paths

    monkeypatch.delenv("FLASHTUNE_CACHE_DIR", raising=False)
    default = paths.cache_dir()
    monkeypatch.setenv("FLASHTUNE_CACHE_DIR", "  ")
    assert paths.cache_dir() == default and paths.kernel_dir() == default / "kernels"


@pytest.mark.parametrize("url, reason", [
    ("postgresql://u@host:abc/db", "not an SQLAlchemy database URL"),
    # a parameter flashtune cannot honour: refused, one warning, and the model keeps running
    ("sqlite:///{db}?timeout=5", "'timeout' not supported"),
], ids=["malformed", "sqlite-parameter"])
def test_a_url_in_the_environment_flashtune_cannot_use_runs_the_model(fresh_db, monkeypatch,
                                                                      url, reason):
    seed(fresh_db, "softmax", "float32", (3, 20), row_config(32))
    monkeypatch.setenv("FLASHTUNE_DB", url.format(db=fresh_db))
    dispatch.reset()
    x = torch.randn(3, 20, device=DEVICE)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for _ in range(3):
            torch.testing.assert_close(flashtune.log_softmax(x), torch.log_softmax(x, -1))
    said = _ours(caught)
    assert len(said) == 1 and reason in said[0], said


_WRITERS = (["clear", "--yes"], ["import", "x.json"])


@pytest.mark.parametrize("command, db, reason", [
    *[(c, "sqlite+://::::", "not an SQLAlchemy database URL") for c in (["show"], *_WRITERS)],
    *[(c, "", "empty") for c in (["show"], *_WRITERS)],
    # Defect: read-only commands ignored URL parameters (they open SQLite files themselves),
    # writers took some: every command refuses them now.
    *[(c, "sqlite:///{path}?timeout=abc", "'timeout' not supported") for c in (["show"], *_WRITERS)],
    *[(c, "sqlite:///{path}?mode=", "'mode' without a value") for c in (["show"], *_WRITERS)],
])
def test_cli_names_a_malformed_url(tmp_path, capsys, command, db, reason):
    seed(tmp_path / "t.sqlite", "softmax", "float32", (4, 32), _GOOD)
    db = db.format(path=tmp_path / "t.sqlite")
    command = [part if part != "x.json" else str(tmp_path / "x.json") for part in command]
    (tmp_path / "x.json").write_text('{"format": "flashtune-winners", "schema_version": 1, "winners": []}')
    rc, out, err = run_cli(capsys, *command, "--db", db)
    lines = err.strip().splitlines()
    assert rc == 2 and len(lines) == 1, err
    assert lines[0].startswith(f"flashtune {command[0]}: error: ") and reason in lines[0]


def test_errors_about_a_url_from_the_environment_name_flashtune_db(tmp_path, capsys,
                                                                    monkeypatch):
    # Defect: a command given no --db reported FLASHTUNE_DB's URL as "url: SQLite URL
    # parameter(s) 'timeout' not supported", without the URL or where it came from (such a
    # FLASHTUNE_DB worked before SQLite parameters were refused); a read-only one told the
    # user to "give the URL without ?mode=ro" to a command that was given none.
    from flashtune.cache import CacheError, TuneDB

    db = tmp_path / "t.sqlite"
    seed(db, "softmax", "float32", (4, 32), _GOOD)
    monkeypatch.setenv("FLASHTUNE_DB", f"sqlite:///{db}?timeout=5")
    with pytest.raises(ValueError, match=r"^FLASHTUNE_DB: SQLite URL parameter\(s\) 'timeout'"):
        resolve_url(None)
    for command in (["show"], ["clear", "--yes"]):
        rc, _, err = run_cli(capsys, *command)
        assert rc == 2 and err.strip() == (
            f"flashtune {command[0]}: error: FLASHTUNE_DB: SQLite URL parameter(s) 'timeout' "
            "not supported; the only one flashtune takes is mode=ro (open the database "
            "read-only)"), err
    monkeypatch.setenv("FLASHTUNE_DB", f"sqlite:///{db}?mode=ro")
    with pytest.raises(CacheError, match=r"^FLASHTUNE_DB=sqlite:///.*set FLASHTUNE_DB without"):
        TuneDB()
    rc, _, err = run_cli(capsys, "clear", "--yes")
    assert rc == 2 and err.startswith(f"flashtune clear: error: FLASHTUNE_DB=sqlite:///{db}?mode=ro "
                                      "is read-only"), err
    assert "set FLASHTUNE_DB without ?mode=ro" in err
    # A URL that was given is still "url", and its fix is still to give it without ?mode=ro.
    with pytest.raises(ValueError, match=r"^url: "):
        resolve_url(f"sqlite:///{db}?timeout=5")
    rc, _, err = run_cli(capsys, "clear", "--yes", "--db", f"sqlite:///{db}?mode=ro")
    assert rc == 2 and "give the URL without ?mode=ro" in err and "FLASHTUNE_DB" not in err


# -- ?mode=ro: a database that readers use and writers refuse ----------------------------------

def test_a_mode_ro_url_is_read_but_never_written(fresh_db, monkeypatch, tmp_path, capsys):
    # Defect: ?mode=ro was ignored (SQLAlchemy warned and opened the file read-write): tune,
    # import and clear wrote to a database the user had marked read-only.
    from flashtune.cache import CacheError, DeviceInfo, TuneDB, read_runtime_winners

    seed(fresh_db, "softmax", "float32", (4, 32), row_config(32))
    url = f"sqlite:///{fresh_db}?mode=ro"
    before = fresh_db.read_bytes()
    monkeypatch.setenv("FLASHTUNE_DB", url)
    dispatch.reset()
    # Readers: the dispatcher, TuneDB(read_only=True), show, export.
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert dispatch.choice("softmax", (4, 32), "float32", DEVICE).how == "exact"
        assert len(read_runtime_winners(DeviceInfo.current(torch.device(DEVICE)), url)) == 1
        with TuneDB(url, read_only=True) as db:
            assert len(db.winners()) == 1
    assert caught == [], [str(w.message) for w in caught]
    rc, out, err = run_cli(capsys, "show", "--db", url)
    assert rc == 0 and "softmax" in out, err
    rc, _, err = run_cli(capsys, "export", str(tmp_path / "out.json"), "--db", url)
    assert rc == 0, err
    # Writers refuse before they do anything, saying why.
    with pytest.raises(CacheError, match=r"read-only \(mode=ro in the URL\)"):
        TuneDB(url)
    journal = tmp_path / "journal.log"
    for command in (["tune", "--interpret", "--problem", "softmax:float32:4x32", "--trials", "1",
                     "--no-isolate", "--journal", str(journal)],
                    ["import", str(tmp_path / "out.json")], ["clear"], ["clear", "--yes"]):
        rc, _, err = run_cli(capsys, *command, "--db", url)
        lines = err.strip().splitlines()
        assert rc == 2 and len(lines) == 1, (command, err)
        assert lines[0].startswith(f"flashtune {command[0]}: error: ")
        assert "read-only (mode=ro in the URL)" in lines[0] and "without ?mode=ro" in lines[0]
    assert not journal.exists()
    assert fresh_db.read_bytes() == before
    with TuneDB(fresh_db, read_only=True) as db:
        assert len(db.winners()) == 1


# -- the CLI on files that are not winner databases ----------------------------------------------

def _foreign_app_db(path) -> None:
    with sqlite3.connect(path) as conn:
        conn.execute("CREATE TABLE users (id INTEGER)")
    conn.close()


def _wrong_columns(path) -> None:
    with sqlite3.connect(path) as conn:
        conn.execute("CREATE TABLE ft_v1_winners (a, b)")
    conn.close()


@pytest.mark.parametrize("make", [
    lambda p: p.write_bytes(os.urandom(4096)), _foreign_app_db, _wrong_columns,
], ids=["random-bytes", "another-apps-db", "wrong-columns"])
@pytest.mark.parametrize("command", [["show"], ["clear"], ["clear", "--yes"],
                                     ["clear", "--yes", "--all-devices"], ["export", "o.json"]])
def test_cli_on_a_file_that_is_not_a_winner_database(tmp_path, capsys, make, command):
    # Defect: `clear --yes` on another program's SQLite file (or an empty one) created the
    # flashtune tables in it and switched it to WAL, then said "deleted 0 winner(s)".
    path = tmp_path / "app.db"
    make(path)
    before = path.read_bytes()
    command = [part if part != "o.json" else str(tmp_path / "o.json") for part in command]
    rc, out, err = run_cli(capsys, *command, "--db", str(path))
    lines = err.strip().splitlines()
    assert rc == 2 and len(lines) == 1 and "Traceback" not in err, (out, err)
    assert lines[0].startswith(f"flashtune {command[0]}: error: ")
    assert path.read_bytes() == before
    assert not (tmp_path / "o.json").exists()


def test_cli_reads_a_zero_byte_database_as_one_with_no_winners(tmp_path, capsys):
    # Defect: a 0-byte file (SQLite's empty database: one a tuner has just created, before its
    # tables) was "no flashtune schema v1 winners table", an error for show, export and clear.
    # It holds no winners; clear --yes still neither creates tables in it nor switches it to WAL.
    path = tmp_path / "tuned.sqlite"
    path.write_bytes(b"")
    rc, out, err = run_cli(capsys, "show", "--db", str(path))
    assert rc == 0 and ": 0" in out and "error" not in err, (out, err)
    export = tmp_path / "o.json"
    rc, _, err = run_cli(capsys, "export", str(export), "--db", str(path))
    assert rc == 0 and "exported 0 winner(s)" in err, err
    assert json.loads(export.read_text())["winners"] == []
    for command in (["clear"], ["clear", "--yes"], ["clear", "--yes", "--all-devices"]):
        rc, out, err = run_cli(capsys, *command, "--db", str(path))
        assert rc == 0 and "nothing to clear" in out and err == "", (command, out, err)
    assert path.read_bytes() == b""
    assert sorted(p.name for p in tmp_path.iterdir()) == ["o.json", "tuned.sqlite"]


# -- the inspection API's device argument ------------------------------------------------------

@pytest.mark.parametrize("device", ["bogus", "cuda:99", object()])
def test_choice_names_a_bad_device(fresh_db, device):
    # Defect: torch's AssertionError / RuntimeError ("Torch not compiled with CUDA enabled").
    problem = AttentionProblem(1, 2, 2, 16, 16, 32, False, "float16")
    with pytest.raises(ValueError, match="device"):
        dispatch.choice("softmax", (4, 32), "float32", device)
    with pytest.raises(ValueError, match="device"):
        dispatch.attention_choice(problem, device)


def test_timestamp_past_the_utc_range_is_a_value_error_for_its_row():
    """9999-12-31 23:59 at -01:00 overflows datetime in UTC: a ValueError (skipped with its row,
    a one-line CLI error), not an OverflowError that escapes every per-row check."""
    from flashtune.cache.records import utc

    with pytest.raises(ValueError, match="out of range"):
        utc("9999-12-31T23:59:59-01:00")
    assert utc("2026-11-22T10:00:00+02:00").isoformat() == "2026-11-22T08:00:00+00:00"


def test_dispatch_decisions_stay_bounded_under_ever_new_shapes(monkeypatch):
    """Like the plans, the memo of decisions is cleared when full: a server whose shapes keep
    changing must not grow memory without bound."""
    import flashtune
    from flashtune.dispatch import chooser
    from flashtune.dispatch.runtime import RUNTIME

    monkeypatch.setattr(chooser, "MAX_CHOICES", 10)
    for rows in range(1, 31):
        x = torch.randn(rows, 8, device=DEVICE)  # where kernels run (CPU: the interpreter)
        torch.testing.assert_close(flashtune.softmax(x, -1), torch.softmax(x, -1))
    assert 0 < len(RUNTIME.dispatcher._choices) <= 10


# -- winners of other template versions: ignored quietly, even where today's space refuses them --

def test_winners_of_other_templates_are_ignored_without_a_warning(fresh_db):
    # Defect: an upgrade that adds a tunable (the backward's align) left the old winners'
    # configs without that key; the runtime read reported them as invalid rows ("edited
    # outside flashtune?") although the dispatcher ignores other templates' winners anyway.
    old_config = row_config(64, fwd=False)
    del old_config["align"]  # the backward space before it had the knob
    seed(fresh_db, "softmax", "float32", (8, 64), row_config(64, rows=2))
    conn = sqlite3.connect(fresh_db)
    with conn:
        columns = ("device_name, capability, sm_count, triton_version, family_hash, op, dtype, "
                   "bucket, config, median_ms, p20_ms, p80_ms, trials, flashtune_version, tuned_at")
        conn.execute(f"INSERT INTO ft_v1_winners ({columns}) SELECT device_name, capability, "
                     "sm_count, triton_version, ?, 'softmax_backward', dtype, bucket, ?, "
                     "median_ms, p20_ms, p80_ms, trials, flashtune_version, tuned_at "
                     "FROM ft_v1_winners", ("0" * 64, json.dumps(old_config)))
        assert conn.execute("SELECT count(*) FROM ft_v1_winners").fetchone() == (2,)
    conn.close()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert dispatch.choice("softmax", (8, 64), "float32", DEVICE).how == "exact"
        assert dispatch.choice("softmax_backward", (8, 64), "float32", DEVICE).how == "default"
    assert _ours(caught) == []
    # the same row tampered under today's family hash is still reported
    conn = sqlite3.connect(fresh_db)
    with conn:
        conn.execute("UPDATE ft_v1_winners SET family_hash = ? WHERE op = 'softmax_backward'",
                     (flashtune.gen.template_family_hash("softmax_backward"),))
    conn.close()
    dispatch.reset()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert dispatch.choice("softmax_backward", (8, 64), "float32", DEVICE).how == "default"
    said = _ours(caught)
    assert len(said) == 1 and "missing keys ['align']" in said[0], said


def test_show_says_why_old_winners_are_skipped(fresh_db, capsys):
    # After an upgrade that added a tunable, `flashtune show` called the old rows "edited
    # outside flashtune?"; they come from other templates, and it now says so.
    from flashtune.cache import TuneDB

    seed(fresh_db, "softmax", "float32", (8, 64), row_config(64, rows=2))
    conn = sqlite3.connect(fresh_db)
    with conn:
        conn.execute("UPDATE ft_v1_winners SET family_hash = ?, config = ?",
                     ("0" * 16, json.dumps({"regime": "row"})))
    conn.close()

    def skipped_rows_warning() -> str:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            with TuneDB(fresh_db, read_only=True) as db:
                assert db.winners() == []
        said = _ours(caught)
        assert len(said) == 1, said
        return said[0]

    assert "tuned on other templates" in skipped_rows_warning()
    conn = sqlite3.connect(fresh_db)
    with conn:
        conn.execute("UPDATE ft_v1_winners SET family_hash = ?",
                     (flashtune.gen.template_family_hash("softmax"),))
    conn.close()
    assert "edited outside flashtune?" in skipped_rows_warning()
    # Review: any family hash that was not today's read as "other templates", one of a form
    # flashtune never writes (edited) included.
    for edited in ("0" * 64, "x", "F" * 16):
        conn = sqlite3.connect(fresh_db)
        with conn:
            conn.execute("UPDATE ft_v1_winners SET family_hash = ?", (edited,))
        conn.close()
        assert "edited outside flashtune?" in skipped_rows_warning()


@pytest.mark.parametrize("command", [["show"], ["export", "x.json"], ["import", "x.json"],
                                     ["clear", "--yes"], ["tune", "--interpret"],
                                     ["bench", "--interpret", "--out", "out"]])
def test_cli_url_errors_name_the_db_option(tmp_path, capsys, command):
    """Defect: a malformed --db was reported as "url: backend 'mysql' is not supported", the
    Python API's argument name, which the command line does not have (FLASHTUNE_DB's errors
    already name FLASHTUNE_DB)."""
    command = [str(tmp_path / part) if part in ("x.json", "out") else part for part in command]
    (tmp_path / "x.json").write_text('{"format": "flashtune-winners", "schema_version": 1, "winners": []}')
    rc, _, err = run_cli(capsys, *command, "--db", "mysql://u@h/d")
    assert rc == 2 and err.strip() == (
        f"flashtune {command[0]}: error: --db: backend 'mysql' is not supported; flashtune "
        "stores winners in sqlite or postgresql"), err
    assert not (tmp_path / "out").exists()
