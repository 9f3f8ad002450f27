"""Broken caches and bad input found by an adversarial audit (each test names its defect).

The rules under test: the runtime read never raises, never changes the database file, and warns
once; the tuner-side TuneDB raises CacheError; every CLI command answers a bad database or bad
input with one ``flashtune CMD: error: ...`` line and a nonzero exit, never a traceback.
"""

from __future__ import annotations

import json
import os
import socket
import sqlite3
import stat
import subprocess
import sys
import time
import warnings
from pathlib import Path

import pytest
import torch

from flashtune.cache import (CacheError, CacheWarning, DeviceInfo, TuneDB,
                             read_runtime_winners)
from flashtune.cache import engine as engine_mod
from flashtune.cache import transfer
from blocking import PIPES, within
from flashtune.cli import main
from cli_helpers import run_cli as _cli
from test_cache_support import DEV, FAMILY, KEY, key_for, row_config, unsearchable  # noqa: F401

DEEP_JSON = "[" * 100_000 + "]" * 100_000  # past Python's recursion limit when parsed


def _store(url, *keys, device=DEV, family=FAMILY):
    with TuneDB(url) as db:
        for key in keys or (KEY,):
            db.upsert_winner(device, family, key, row_config(), median_ms=1.0, p20_ms=1.0,
                             p80_ms=1.0, trials=1)


_UPDATES = {column: f"UPDATE ft_v1_winners SET {column} = ? WHERE bucket = ?"  # fixed names
            for column in ("config", "bucket")}


def _set_column(path, bucket_rows: int, column: str, text: str) -> None:
    """Edit one winner row behind flashtune's back (the row of key_for(bucket_rows))."""
    conn = sqlite3.connect(path)
    with conn:
        assert conn.execute(_UPDATES[column],
                            (text, key_for(bucket_rows).bucket_json())).rowcount == 1
    conn.close()


def _set_config(path, bucket_rows: int, config_text: str) -> None:
    _set_column(path, bucket_rows, "config", config_text)


def _runtime(url) -> tuple[list, list[str]]:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        first = read_runtime_winners(DEV, url)
        assert read_runtime_winners(DEV, url) == first
    return first, [str(w.message) for w in caught if issubclass(w.category, CacheWarning)]


def _one_line_error(err: str, command: str) -> None:
    assert "Traceback" not in err
    lines = [line for line in err.splitlines() if line.strip()]
    assert lines and lines[0].startswith(f"flashtune {command}: error: "), err


# -- the runtime read must not change files it only reads --------------------------------------

@pytest.mark.parametrize("kind", ["zero-byte file", "another app's database"])
def test_runtime_read_leaves_foreign_files_untouched(tmp_path, kind):
    # Defect: the reader set PRAGMA journal_mode=WAL, turning a zero-byte file into a database
    # and converting another application's SQLite file to WAL (with -wal/-shm files).
    path = tmp_path / "foreign.sqlite"
    if kind == "zero-byte file":
        path.write_bytes(b"")
    else:
        conn = sqlite3.connect(path)
        with conn:
            conn.execute("CREATE TABLE users (id INTEGER, name TEXT)")
        conn.close()
    before = path.read_bytes()
    winners, said = _runtime(f"sqlite:///{path}")
    if kind == "zero-byte file":  # SQLite's empty database: no winners, nothing to warn about
        assert winners == [] and said == []
    else:
        assert winners == [] and len(said) == 1 and "no flashtune schema v1 winners table" in said[0]
    assert path.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["foreign.sqlite"]


def test_show_and_export_do_not_write_or_wait_for_a_writer(tmp_path, capsys):
    # Defect: show/export opened the database for writing (BEGIN IMMEDIATE and CREATE TABLE),
    # so they waited up to 30 s behind a tuner's write lock and failed on read-only storage.
    path = tmp_path / "tuned.sqlite"
    _store(f"sqlite:///{path}")
    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")
    try:
        start = time.monotonic()
        rc, out, _ = _cli(capsys, "show", "--all-devices", "--db", str(path))
        assert rc == 0 and "winners for all devices: 1" in out
        rc, _, _ = _cli(capsys, "export", str(tmp_path / "out.json"), "--db", str(path))
        assert rc == 0
        rc, out, _ = _cli(capsys, "clear", "--all-devices", "--db", str(path))
        assert rc == 1 and "would delete 1 winner" in out
        assert time.monotonic() - start < 10
    finally:
        holder.execute("ROLLBACK")
        holder.close()


def test_read_only_tunedb_creates_nothing_and_refuses_writes(tmp_path):
    missing = tmp_path / "sub" / "tuned.sqlite"
    with pytest.raises(CacheError, match="no winner database"):
        TuneDB(missing, read_only=True)
    assert not missing.parent.exists()
    empty = tmp_path / "empty.sqlite"
    empty.write_bytes(b"")  # SQLite's empty database: no winners, nothing created in it
    with TuneDB(empty, read_only=True) as db:
        assert db.empty and db.winners() == [] and db.count_winners() == 0
        assert db.trials(DEV, FAMILY, KEY) == []
    assert empty.read_bytes() == b""
    _store(f"sqlite:///{tmp_path / 'ok.sqlite'}")
    with TuneDB(tmp_path / "ok.sqlite", read_only=True) as db:
        assert len(db.winners()) == 1
        with pytest.raises(CacheError, match="read-only"):
            db.clear()


@pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() == 0,
                    reason="root ignores file permissions")
def test_runtime_reads_a_database_in_a_read_only_folder(tmp_path):
    # Defect: a pre-tuned database shipped read-only could not be used (WAL needs -shm).
    folder = tmp_path / "ro"
    folder.mkdir()
    _store(f"sqlite:///{folder / 'tuned.sqlite'}")
    for extra in folder.glob("tuned.sqlite-*"):
        extra.unlink()
    (folder / "tuned.sqlite").chmod(0o444)
    folder.chmod(0o555)
    try:
        winners, said = _runtime(f"sqlite:///{folder / 'tuned.sqlite'}")
    finally:
        folder.chmod(0o755)
    assert len(winners) == 1 and said == []


class _UnopenableConnection:
    """What sqlite3 returns for a WAL database whose -shm file cannot be made. SQLite's words
    differ between versions: 3.40 says "attempt to write a readonly database"."""

    message = "unable to open database file"

    def execute(self, _sql):
        raise sqlite3.OperationalError(self.message)

    def close(self):
        pass


def _first_open_fails(monkeypatch, message="unable to open database file"):
    uris = []
    real_connect = sqlite3.connect

    def connect(database, **kwargs):
        uris.append(database)
        if len(uris) > 1:
            return real_connect(database, **kwargs)
        unopenable = _UnopenableConnection()
        unopenable.message = message
        return unopenable

    monkeypatch.setattr(engine_mod.sqlite3, "connect", connect)
    return uris


@pytest.mark.parametrize("message", ["unable to open database file",
                                     "attempt to write a readonly database"])
def test_immutable_reads_only_where_nobody_can_write(tmp_path, monkeypatch, message):
    # Runs as root too (the mode bits are read, not enforced). Immutable reads take no locks:
    # safe on read-only storage, unsafe where a tuning user may be writing the file.
    folder = tmp_path / "shared"
    folder.mkdir()
    path = folder / "tuned.sqlite"
    _store(f"sqlite:///{path}")
    uris = _first_open_fails(monkeypatch, message)
    with pytest.raises(sqlite3.OperationalError, match=message):
        engine_mod._connect_read_only(path, timeout=0.1)  # someone could write: no immutable
    assert len(uris) == 1
    path.chmod(0o444)
    folder.chmod(0o555)
    try:
        uris.clear()
        engine_mod._connect_read_only(path, timeout=0.1).close()
    finally:
        folder.chmod(0o755)
    assert len(uris) == 2 and "immutable=1" in uris[1] and "mode=ro" in uris[1]


# -- one tampered row spoils only itself --------------------------------------------------------

def test_deeply_nested_row_json_spoils_only_its_row(tmp_path, capsys):
    # Defect: RecursionError escaped the row check: the runtime lost every winner and
    # show/export/clear died with a traceback.
    path = tmp_path / "tuned.sqlite"
    url = f"sqlite:///{path}"
    _store(url, key_for(64), key_for(128))
    _set_config(path, 128, DEEP_JSON)
    winners, said = _runtime(url)
    assert len(winners) == 1 and len(said) == 1 and "nested too deeply" in said[0]
    rc, out, err = _cli(capsys, "show", "--all-devices", "--db", str(path))
    assert rc == 0 and "winners for all devices: 1" in out and "Traceback" not in err


def test_clear_preview_counts_rows_that_fail_validation(tmp_path, capsys):
    # Defect: the preview counted valid winners only, then --yes deleted more than announced.
    path = tmp_path / "tuned.sqlite"
    _store(f"sqlite:///{path}", key_for(64), key_for(128))
    _set_config(path, 128, "{not json")
    rc, out, _ = _cli(capsys, "clear", "--all-devices", "--db", str(path))
    assert rc == 1 and "would delete 2 winner(s)" in out
    rc, out, _ = _cli(capsys, "clear", "--all-devices", "--yes", "--db", str(path))
    assert rc == 0 and "deleted 2 winner(s)" in out


# -- database URLs whose driver is unknown, missing or asynchronous -----------------------------

@pytest.mark.parametrize("url, reason", [
    ("postgresql+nosuchdriver://u@127.0.0.1/db", "unknown driver"),
    ("postgresql+asyncpg://u@127.0.0.1/db", "asynchronous"),
    ("sqlite+aiosqlite:///{path}", "asynchronous"),
    # Drivers not built on libpq get none of its wait bounds (connect, lock, statement): with
    # one installed, a silent server or a held lock hung a model's first call. Where it was
    # not installed, the advice was to install it.
    ("postgresql+pg8000://u@127.0.0.1/db", "driver 'postgresql+pg8000' is not supported"),
    ("postgresql+psycopg2cffi://u@127.0.0.1/db",
     "driver 'postgresql+psycopg2cffi' is not supported"),
])
def test_bad_drivers_are_a_clear_error(tmp_path, capsys, url, reason):
    # Defect: NoSuchModuleError / ModuleNotFoundError reached the user as a traceback.
    path = tmp_path / "tuned.sqlite"
    _store(f"sqlite:///{path}")
    url = url.format(path=path)
    for command in (["show"], ["export", str(tmp_path / "o.json")], ["clear", "--yes"]):
        rc, _, err = _cli(capsys, *command, "--db", url)
        assert rc == 2 and reason in err
        _one_line_error(err, command[0])
    winners, said = _runtime(url)
    assert winners == [] and len(said) == 1 and reason in said[0]


@pytest.mark.parametrize("url", ["sqlite://tmp/tuned.sqlite", "sqlite://user:pw@h/x.sqlite",
                                 "sqlite://:5/x.sqlite"])
def test_an_sqlite_url_with_a_host_is_a_clear_error(tmp_path, capsys, monkeypatch, url):
    # Defect: sqlite://tmp/tuned.sqlite (a slash short) read "tmp" as a host: show and the
    # runtime looked for tuned.sqlite in the current folder ("does not exist"), and tune and
    # import left an empty file there and died in SQLAlchemy's ArgumentError traceback.
    monkeypatch.chdir(tmp_path)
    for command in (["show"], ["import", str(tmp_path / "o.json")], ["clear", "--yes"],
                    ["tune", "--interpret", "--problem", "softmax:float32:8x100"]):
        rc, _, err = _cli(capsys, *command, "--db", url)
        assert rc == 2 and "has no host" in err, err
        _one_line_error(err, command[0])
    winners, said = _runtime(url)
    assert winners == [] and len(said) == 1 and "has no host" in said[0]
    assert list(tmp_path.iterdir()) == []  # no stray file in the current folder


@pytest.mark.parametrize("url", ["sqlite:/tmp/tuned.sqlite", "sqlite:tuned.sqlite",
                                 "postgresql+psycopg2:/u:secret@h/db",
                                 # a password with a space, which libpq takes unencoded
                                 "postgresql:/u:secret words@h/db"])
def test_a_url_without_its_slashes_is_a_clear_error(tmp_path, capsys, monkeypatch, url):
    # Defect: sqlite:/tmp/tuned.sqlite (a slash short) was taken as a file path: tune made the
    # folders ./sqlite:/tmp and stored its winners there, where no runtime in another folder
    # looks, and show said "no winner database at sqlite:/tmp/tuned.sqlite".
    monkeypatch.chdir(tmp_path)
    for command in (["show"], ["clear", "--yes"],
                    ["tune", "--interpret", "--problem", "softmax:float32:8x100"]):
        rc, _, err = _cli(capsys, *command, "--db", url)
        assert rc == 2 and "without the '//'" in err and "secret" not in err, err
        _one_line_error(err, command[0])
    monkeypatch.setenv("FLASHTUNE_DB", url)
    rc, _, err = _cli(capsys, "show")
    assert rc == 2 and "FLASHTUNE_DB" in err and "without the '//'" in err
    rc, out, err = _cli(capsys, "env")
    assert rc == 0 and "secret" not in out + err
    winners, said = _runtime(url)
    assert winners == [] and len(said) == 1 and "without the '//'" in said[0]
    assert "secret" not in said[0]  # the warning quotes FLASHTUNE_DB: its password hidden
    assert list(tmp_path.iterdir()) == []  # no folder named "sqlite:" made here
    assert _runtime(tmp_path / "sqlite:x.sqlite")[0] == []  # a Path is a path, whatever its name


def test_missing_driver_module_is_a_clear_error(tmp_path, capsys, monkeypatch):
    # Defect: a missing SQLite driver module (sqlite+pysqlcipher) was a traceback.
    import sqlalchemy

    path = tmp_path / "tuned.sqlite"
    _store(f"sqlite:///{path}")
    real = sqlalchemy.create_engine

    def no_driver(*args, **kwargs):
        raise ModuleNotFoundError("No module named 'fakedriver'", name="fakedriver")

    monkeypatch.setattr(engine_mod, "create_engine", no_driver)
    rc, _, err = _cli(capsys, "show", "--db", str(path))
    assert rc == 2 and "fakedriver" in err and "not installed" in err
    _one_line_error(err, "show")
    monkeypatch.setattr(engine_mod, "create_engine", real)


def test_silent_postgres_server_does_not_hang_the_cli(monkeypatch):
    # libpq waits forever by default; TuneDB's 30 s lock timeout was also its connect timeout.
    pytest.importorskip("psycopg2")
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(8)  # accepts TCP connections and never answers
    port = listener.getsockname()[1]
    monkeypatch.setattr(engine_mod, "MAX_CONNECT_S", 1)
    try:
        start = time.monotonic()
        with pytest.raises(CacheError, match="timeout"):
            TuneDB(f"postgresql+psycopg2://u:pw@127.0.0.1:{port}/db", timeout=30)
        assert time.monotonic() - start < 8
    finally:
        listener.close()


# -- import and export --------------------------------------------------------------------------

def _export_doc(tmp_path) -> dict:
    path = tmp_path / "src.sqlite"
    _store(f"sqlite:///{path}")
    with TuneDB(path) as db:
        db.export_json(tmp_path / "good.json")
    return json.loads((tmp_path / "good.json").read_text())


@pytest.mark.parametrize("case, reason", [
    ("nested", "nested too deeply"),
    ("binary", "not UTF-8"),
    ("huge", "too large"),
    ("trials overflow", "trials must be in"),
    ("sm_count overflow", "sm_count must be in"),
])
def test_import_rejects_files_that_used_to_crash(tmp_path, capsys, monkeypatch, case, reason):
    # Defects: RecursionError, a message without the path, OverflowError from the driver (all
    # tracebacks) and minutes spent validating a file hundreds of MB large.
    doc = _export_doc(tmp_path)
    target = tmp_path / "in.json"
    if case == "nested":
        target.write_text('{"format": "flashtune-winners", "winners": ' + DEEP_JSON + "}")
    elif case == "binary":
        target.write_bytes(bytes(range(256)))
    elif case == "huge":
        monkeypatch.setattr(transfer, "MAX_IMPORT_BYTES", 100)
        target.write_text(json.dumps(doc))
    else:
        row = doc["winners"][0]
        if case == "trials overflow":
            row["trials"] = 10**30
        else:
            row["device"]["sm_count"] = 10**30
        target.write_text(json.dumps(doc))
    db = tmp_path / "dst.sqlite"
    rc, _, err = _cli(capsys, "import", str(target), "--db", str(db))
    assert rc == 2 and reason in err
    _one_line_error(err, "import")
    with TuneDB(db) as check:
        assert check.winners() == []


def test_export_never_creates_a_database(tmp_path, capsys):
    # Defect: exporting from a missing database created it (and its folders), then wrote 0 rows.
    missing = tmp_path / "nowhere" / "tuned.sqlite"
    rc, _, err = _cli(capsys, "export", str(tmp_path / "o.json"), "--db", str(missing))
    assert rc == 2 and "no winner database" in err
    _one_line_error(err, "export")
    assert not missing.parent.exists() and not (tmp_path / "o.json").exists()


def test_export_names_a_database_it_cannot_look_at(tmp_path, capsys, monkeypatch):
    # Defect: a symbolic link loop at the database path was "no winner database at ... (run
    # `flashtune tune` first)", and a folder on its path this user may not search was a bare
    # "[Errno 13] Permission denied: '...'" (TuneDB(read_only=True) asked Path.is_file).
    loop = tmp_path / "loop.sqlite"
    loop.symlink_to(loop)
    rc, _, err = _cli(capsys, "export", str(tmp_path / "o.json"), "--db", str(loop))
    assert rc == 2 and "symbolic link loop" in err and str(loop) in err, err
    assert "flashtune tune" not in err and "no winner database" not in err, err
    _one_line_error(err, "export")
    hidden = tmp_path / "private" / "tuned.sqlite"
    _store(f"sqlite:///{hidden}")
    unsearchable(monkeypatch, hidden)
    rc, _, err = _cli(capsys, "export", str(tmp_path / "o.json"), "--db", str(hidden))
    assert rc == 2 and "permission denied" in err and str(hidden) in err, err
    assert "[Errno" not in err and "flashtune tune" not in err, err
    _one_line_error(err, "export")
    assert not (tmp_path / "o.json").exists()
    with pytest.raises(CacheError, match="permission denied"):
        TuneDB(f"sqlite:///{hidden}", read_only=True)


def test_export_target_errors_and_file_mode(tmp_path, capsys):
    path = tmp_path / "tuned.sqlite"
    _store(f"sqlite:///{path}")
    for target, reason in [(tmp_path, "is a folder"),
                           (tmp_path / "no" / "such" / "o.json", "cannot write there")]:
        rc, _, err = _cli(capsys, "export", str(target), "--db", str(path))
        assert rc == 2 and reason in err
        _one_line_error(err, "export")
    # Defect: the file kept mkstemp's private mode 0600, unreadable by whoever it is shared with.
    old = os.umask(0o022)
    try:
        rc, _, _ = _cli(capsys, "export", str(tmp_path / "o.json"), "--db", str(path))
    finally:
        os.umask(old)
    assert rc == 0 and (tmp_path / "o.json").stat().st_mode & 0o777 == 0o644


def test_export_that_fails_midway_names_the_file_and_keeps_the_old_one(tmp_path, capsys,
                                                                      monkeypatch):
    # Defect (audit): on a full disk the export said only "error: [Errno 28] No space left on
    # device", naming no file (the old file and no temporary file were left, as they should).
    import errno

    path = tmp_path / "tuned.sqlite"
    _store(f"sqlite:///{path}")
    out = tmp_path / "w.json"
    out.write_text("old")

    def disk_full(*args, **kwargs):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(transfer.json, "dump", disk_full)
    rc, _, err = _cli(capsys, "export", str(out), "--db", str(path))
    assert rc == 2 and f"{out}: cannot write there" in err and "No space left" in err, err
    _one_line_error(err, "export")
    assert out.read_text() == "old"
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(".w.json")) == []


def test_export_to_a_long_file_name(tmp_path, capsys):
    # Defect (audit): a file name of 239 to 255 bytes, which the file system takes, could not
    # be exported to: the temporary file beside it (".NAME.<12 hex>.tmp") was past NAME_MAX,
    # "cannot write there (File name too long)".
    path = tmp_path / "tuned.sqlite"
    _store(f"sqlite:///{path}")
    out = tmp_path / ("w" * 245 + ".json")
    out.write_text("old")  # a name the file system takes
    rc, _, err = _cli(capsys, "export", str(out), "--db", str(path))
    assert rc == 0, err
    assert json.loads(out.read_text())["format"] == "flashtune-winners"
    assert not [p.name for p in tmp_path.iterdir() if p.name.endswith(".tmp")]


@PIPES
def test_export_leaves_links_and_pipes_alone(tmp_path, capsys):
    # Defects (audit): the export replaced a symbolic link with a file, leaving the file it
    # named stale; it blocked forever opening a named pipe (to look for an SQLite header), and
    # would then have replaced it, as it replaced device nodes (as root, `flashtune export
    # /dev/full` turned the device into a JSON file). A link is refused, not followed: one
    # planted by another user in a shared folder would aim the export at the caller's files.
    path = tmp_path / "tuned.sqlite"
    _store(f"sqlite:///{path}")
    real = tmp_path / "real.json"
    real.write_text("old")
    link = tmp_path / "link.json"
    link.symlink_to(real)
    pipe = tmp_path / "pipe"
    os.mkfifo(pipe)
    for target, reason in [(link, "is a symbolic link"), (pipe, "not a regular file")]:
        with within(20):
            rc, _, err = _cli(capsys, "export", str(target), "--db", str(path))
        assert rc == 2 and reason in err, err
        _one_line_error(err, "export")
    assert link.is_symlink() and real.read_text() == "old"
    assert stat.S_ISFIFO(os.lstat(pipe).st_mode)


def test_export_keeps_the_mode_of_the_file_it_replaces(tmp_path, capsys):
    # A group-shared export stays shared when written again (the new file is made beside it
    # and moved over it, so it would otherwise get the umask's mode).
    path = tmp_path / "tuned.sqlite"
    _store(f"sqlite:///{path}")
    out = tmp_path / "shared.json"
    out.write_text("old")
    out.chmod(0o664)
    old = os.umask(0o077)
    try:
        rc, _, err = _cli(capsys, "export", str(out), "--db", str(path))
    finally:
        os.umask(old)
    assert rc == 0, err
    assert json.loads(out.read_text())["format"] == "flashtune-winners"
    if os.name == "posix":
        assert stat.S_IMODE(out.stat().st_mode) == 0o664


@PIPES
def test_import_refuses_what_is_not_a_regular_file(tmp_path, capsys):
    # Defect (audit): `flashtune import /dev/zero` read until the process was killed (a device
    # has no size to check), and a named pipe blocked forever.
    pipe = tmp_path / "pipe"
    os.mkfifo(pipe)
    db = tmp_path / "dst.sqlite"
    for target in (pipe, tmp_path):
        with within(20):
            rc, _, err = _cli(capsys, "import", str(target), "--db", str(db))
        assert rc == 2 and "not a regular file" in err, err
        _one_line_error(err, "import")


def test_a_folder_given_as_the_database_is_named_a_folder(tmp_path, capsys):
    # Defect (audit): show and clear said "no winner database at DIR" (export: "a folder").
    # Review (session 41): and exit status 0 with "run `flashtune tune` first", which then
    # refused the folder; README keeps status 0 for a database that does not exist yet.
    for command in ("show", "clear", "export"):
        args = [str(tmp_path / "o.json")] if command == "export" else []
        rc, out, err = _cli(capsys, command, *args, "--db", str(tmp_path))
        assert rc == 2 and f"{tmp_path} is a folder, not a winner database file" in err, err
        assert "flashtune tune" not in err and not out, (out, err)
        _one_line_error(err, command)


@PIPES
def test_a_pipe_or_device_given_as_the_database_is_named_so(tmp_path, capsys):
    # Review (session 41): show and clear called a named pipe or /dev/null at --db "no winner
    # database" (status 0, "run `flashtune tune` first"), where tune refused it (status 2).
    pipe = tmp_path / "pipe"
    os.mkfifo(pipe)
    for target in (str(pipe), os.devnull):
        for command in ("show", "clear", "tune"):
            args = ["--interpret", "--problem", "softmax:float32:4x100"] if command == "tune" else []
            with within(20):
                rc, out, err = _cli(capsys, command, *args, "--db", target)
            assert rc == 2 and f"{target} is not a regular file" in err, (command, target, err)
            assert "run `flashtune tune`" not in err, err
            _one_line_error(err, command)
    assert stat.S_ISFIFO(os.stat(pipe).st_mode)  # left as it was


@PIPES
def test_the_runtime_names_a_pipe_given_as_the_database(tmp_path):
    # Defect (audit): the runtime said a pipe or /dev/null "does not exist".
    pipe = tmp_path / "pipe"
    os.mkfifo(pipe)
    with within(20):
        winners, said = _runtime(f"sqlite:///{pipe}")
    assert winners == [] and len(said) == 1 and "is not a regular file" in said[0], said


def test_buckets_no_problem_can_have_are_not_served_or_exported(tmp_path, capsys):
    # Defect (audit): import refused such keys, but a row edited in the database was read as
    # valid: the dispatcher served it as a "nearest" winner, and export wrote it, so the file
    # no longer imported (one bad row refuses the whole file).
    path = tmp_path / "tuned.sqlite"
    _store(f"sqlite:///{path}", key_for(64), key_for(128))
    _set_column(path, 128, "bucket", json.dumps({"cols_bucket": 100, "rows_bucket": 128}))
    winners, said = _runtime(f"sqlite:///{path}")
    assert [w.key for w in winners] == [key_for(64)]
    assert len(said) == 1 and "skipped 1 invalid winner row" in said[0] and "100" in said[0]
    # show lists every stored row, and says which one the runtime and export skip
    rc, listed, _ = _cli(capsys, "show", "--all-devices", "--db", str(path))
    marked = [line for line in listed.splitlines() if "[ignored: no problem has this bucket]" in line]
    assert rc == 0 and len(marked) == 1 and "128x100" in marked[0], listed
    out = tmp_path / "out.json"
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with TuneDB(path) as db:
            assert db.export_json(out) == 1
    assert any("cols_bucket" in str(w.message) for w in caught)
    rc, _, err = _cli(capsys, "import", str(out), "--db", str(tmp_path / "dst.sqlite"))
    assert rc == 0, err
    with TuneDB(tmp_path / "dst.sqlite") as check:
        assert [w.key for w in check.winners()] == [key_for(64)]


# -- tune options -------------------------------------------------------------------------------

def test_tune_names_a_bad_journal_before_any_work(tmp_path, capsys):
    # Defect: the error came after the first problem's compile, as a bare "[Errno 2] ...".
    rc, _, err = _cli(capsys, "tune", "--interpret", "--journal",
                      str(tmp_path / "no" / "such" / "j.log"), "--db", str(tmp_path / "t.sqlite"))
    assert rc == 2 and "--journal" in err
    _one_line_error(err, "tune")


# -- the end-to-end rule, and how the CLI prints warnings ---------------------------------------

def test_model_runs_on_a_corrupt_cache_with_one_warning(tmp_path, monkeypatch, device):
    import flashtune
    from flashtune.dispatch import reset

    path = tmp_path / "tuned.sqlite"
    # a row of the device the model runs on and of today's templates: the runtime reads only those
    from flashtune.gen import template_family_hash

    _store(f"sqlite:///{path}", key_for(64), device=DeviceInfo.current(torch.device(device)),
           family=template_family_hash("softmax"))
    _set_config(path, 64, DEEP_JSON)
    monkeypatch.setenv("FLASHTUNE_DB", f"sqlite:///{path}")
    reset()
    try:
        x = torch.randn(4, 100, device=device)  # where kernels run (CPU: the interpreter)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            for _ in range(3):
                torch.testing.assert_close(flashtune.softmax(x, -1), torch.softmax(x, -1))
    finally:
        monkeypatch.undo()
        reset()
    said = [str(w.message) for w in caught if issubclass(w.category, CacheWarning)]
    assert len(said) == 1 and "nested too deeply" in said[0]


def test_cli_warnings_are_one_line(tmp_path):
    # Python's default format echoed a source line of flashtune under each warning.
    path = tmp_path / "tuned.sqlite"
    _store(f"sqlite:///{path}", key_for(64))
    _set_config(path, 64, "{not json")
    env = {**os.environ, "PYTHONWARNINGS": "default"}
    done = subprocess.run([sys.executable, "-m", "flashtune", "show", "--all-devices", "--db",
                           str(path)], capture_output=True, text=True, env=env, timeout=120,
                          cwd=Path(__file__).resolve().parents[1])
    assert done.returncode == 0, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("flashtune show: warning: "), done.stderr


# -- keys no problem can have, and text that is not UTF-8 ---------------------------------------

@pytest.mark.parametrize("field, value, reason", [
    ("dtype", "float64", "dtype must be one of"),
    ("dtype", "bfloat16,float32", "dtype must be one of"),
    ("bucket", {"rows_bucket": "4096", "cols_bucket": 4096}, "rows_bucket must be a power of two"),
    ("bucket", {"rows_bucket": 4096, "cols_bucket": 4000}, "cols_bucket must be a power of two"),
    ("bucket", {"rows_bucket": 4096, "cols_bucket": True}, "cols_bucket must be a power of two"),
    ("bucket", {"rows_bucket": 4096}, "exactly the fields"),
    ("bucket", {"rows_bucket": 4096, "cols_bucket": 4096, "causal": False}, "exactly the fields"),
    ("bucket", {"rows_bucket": 4096, "cols_bucket": 2**40}, "cols_bucket must be a power of two"),
    ("bucket", {"rows_bucket": 4096, "cols_bucket": 4096, "row_grain": True},
     "row_grain must be a power of two"),
    ("bucket", {"rows_bucket": 4096, "cols_bucket": 4096, "row_grain": 3},
     "row_grain must be a power of two"),
    ("bucket", {"rows_bucket": 4096, "cols_bucket": 4096, "row_grain": 16},
     "row_grain must be a power of two in [1, 8]"),   # whole rows have no grain field
    ("bucket", {"rows_bucket": 4096, "cols_bucket": 8, "row_grain": 4},
     "no float16 problem's bucket"),   # 5-8 columns: grain 1, 2 or 8 (of 16), never 4 alone
    ("bucket", {"rows_bucket": 4096, "cols_bucket": 4, "row_grain": 2},
     "no float16 problem's bucket"),   # 3 or 4 columns: grain 1 or 4, never 2
    ("bucket", {"rows_bucket": 4096, "cols_bucket": 4}, "no float16 problem's bucket"),
])
def test_import_rejects_keys_no_problem_can_have(tmp_path, capsys, field, value, reason):
    # Defect: such rows were imported; the dispatcher never reaches them, and a str bucket next
    # to int buckets made `flashtune show` fail sorting them (a TypeError traceback).
    doc = _export_doc(tmp_path)
    doc["winners"].append(dict(doc["winners"][0], **{field: value}))
    target = tmp_path / "in.json"
    target.write_text(json.dumps(doc))
    db = tmp_path / "dst.sqlite"
    rc, _, err = _cli(capsys, "import", str(target), "--db", str(db))
    assert rc == 2 and "winners[1]" in err and reason in err, err
    _one_line_error(err, "import")
    with TuneDB(db) as check:
        assert check.winners() == []


# A 128 x 128 tile of 4 warps holds 384 values per thread at head dim 256 (at most 256 fit).
_BIG_TILE = {"BLOCK_M": 128, "BLOCK_N": 128, "num_warps": 4, "num_stages": 1}


@pytest.mark.parametrize("op, dtype, bucket, config, reason", [
    # rows of 4097 to 8192 columns: a row tile of 4096 holds none of them
    ("softmax", "float16", {"rows_bucket": 4, "cols_bucket": 8192}, {"block": 4096},
     "row regime with block 4096 cannot hold 4112 columns"),
    # the audit's case: rows of 65 to 128 float32 columns, a tile of 16
    ("softmax", "float32", {"rows_bucket": 4, "cols_bucket": 128},
     {"regime": "row", "block": 16, "num_warps": 1}, "cannot hold 68 columns"),
    ("attention_fwd", "float16", {"head_dim": 256, "nq_bucket": 128, "nk_bucket": 128,
                                  "bh_bucket": 4, "causal": False}, _BIG_TILE,
     "384 values per thread"),
])
def test_import_rejects_winners_that_run_no_problem_of_their_bucket(tmp_path, capsys, op, dtype,
                                                                     bucket, config, reason):
    # Defect (audit): such a row was imported (exit 0) and listed by show as a winner, yet the
    # dispatcher never took it (every problem of its bucket ran the default), as it never
    # reaches a bucket no problem has, which import already refused.
    from flashtune.gen import op_spec

    doc = _export_doc(tmp_path)
    first = doc["winners"][0]
    config = op_spec(op).space.complete({**(first["config"] if op == "softmax" else {}),
                                         **config}).as_dict()
    doc["winners"].append(dict(first, op=op, dtype=dtype, bucket=bucket, config=config))
    target = tmp_path / "in.json"
    target.write_text(json.dumps(doc))
    db = tmp_path / "dst.sqlite"
    rc, _, err = _cli(capsys, "import", str(target), "--db", str(db))
    assert rc == 2 and "winners[1]" in err and "runs no problem of its bucket" in err, err
    assert reason in err, err
    _one_line_error(err, "import")
    with TuneDB(db) as check:
        assert check.winners() == []


def test_show_marks_and_export_skips_winners_that_run_no_problem_of_their_bucket(tmp_path,
                                                                                  capsys):
    # Such a row already in a database (the Python API, or an older flashtune's import) is
    # listed as ignored, and export leaves it out (the file must import again).
    from flashtune.cache import ProblemKey

    path = tmp_path / "tuned.sqlite"
    narrow = ProblemKey.make("softmax", "float16", {"rows_bucket": 4, "cols_bucket": 8192})
    _store(f"sqlite:///{path}", KEY, narrow)  # both hold row tiles of 4096 columns
    rc, listed, _ = _cli(capsys, "show", "--all-devices", "--db", str(path))
    marked = [line for line in listed.splitlines()
              if "[ignored: runs no problem of its bucket]" in line]
    assert rc == 0 and len(marked) == 1 and "4x8192" in marked[0], listed
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with TuneDB(path) as db:
            assert db.export_json(tmp_path / "out.json") == 1
    assert any("runs no problem of its bucket" in str(w.message) for w in caught)


def test_import_takes_winners_that_run_only_the_narrowest_problems_of_their_bucket(tmp_path,
                                                                                     capsys):
    # A winner runs the problem it was tuned on, which may be narrower than its bucket's
    # widest: rows of 2**30 + 4 float32 columns (bucket 2**31, whose widest row no kernel
    # takes), or 2**30 + 1 rows one program each (the widest, 2**31, passes the grid limit).
    from flashtune.cache import ProblemKey
    from flashtune.gen import op_spec
    from flashtune.gen.softmax_space import SoftmaxProblem, problem_bucket

    space = op_spec("softmax").space
    wide = space.complete({"regime": "online", "block": 4096, "num_warps": 8})
    many = space.complete({"regime": "row", "block": 16, "num_warps": 1})
    path = tmp_path / "src.sqlite"
    with TuneDB(path) as db:
        for problem, config in [(SoftmaxProblem(4, 2**30 + 4, "float32"), wide),
                                (SoftmaxProblem(2**30 + 1, 16, "float32"), many)]:
            key = ProblemKey.make("softmax", "float32", problem_bucket(problem))
            db.upsert_winner(DEV, FAMILY, key, config.as_dict(), median_ms=1.0, p20_ms=1.0,
                             p80_ms=1.0, trials=1)
        assert db.export_json(tmp_path / "out.json") == 2
    rc, _, err = _cli(capsys, "import", str(tmp_path / "out.json"), "--db",
                      str(tmp_path / "dst.sqlite"))
    assert rc == 0, err
    with TuneDB(tmp_path / "dst.sqlite") as check:
        assert len(check.winners()) == 2


@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "float32"])
def test_softmax_keys_are_checked_like_the_problem_bucket(dtype):
    # Every bucket problem_bucket gives passes, rows not of whole vectors (a row_grain field)
    # included, and the problem `show` compares defaults on lies in the same bucket.
    from flashtune.gen.problem_keys import check_problem_key
    from flashtune.gen.softmax_space import SoftmaxProblem, bucket_problem, problem_bucket

    # Whole rows: of one 16-byte vector (fp32), of 16 elements (fp16/bf16: _whole_width).
    vector = 4 if dtype == "float32" else 16
    for n_cols in [*range(1, 70), 100, 4095, 4096, 50257, 65534, 65536, 1 << 20]:
        bucket = problem_bucket(SoftmaxProblem(7, n_cols, dtype))
        check_problem_key("softmax_backward", dtype, bucket)
        lowest = n_cols & -n_cols
        assert bucket.get("row_grain") == (lowest if lowest < vector else None), n_cols
        assert problem_bucket(bucket_problem(bucket, dtype)) == bucket, n_cols


def test_attention_keys_are_checked_like_the_problem_bucket():
    from flashtune.gen.attention_space import AttentionProblem, problem_bucket
    from flashtune.gen.problem_keys import check_problem_key

    good = problem_bucket(AttentionProblem(2, 8, 8, 1000, 1000, 72, True, "bfloat16"))
    check_problem_key("attention_fwd", "bfloat16", good)
    for change, reason in [({"head_dim": 12}, "head_dim must be a multiple"),
                           ({"causal": 1}, "causal must be true or false"),
                           ({"nq_bucket": 1000}, "nq_bucket must be a power of two"),
                           ({"bh_bucket": 0}, "bh_bucket must be a power of two")]:
        with pytest.raises((ValueError, TypeError), match=reason):
            check_problem_key("attention_fwd", "bfloat16", {**good, **change})
    with pytest.raises(ValueError, match="dtype must be one of"):
        check_problem_key("attention_fwd", "float32", good)
    with pytest.raises(ValueError, match="unknown op"):
        check_problem_key("attention_bwd", "float16", good)


def test_show_lists_buckets_of_mixed_value_types(tmp_path, capsys):
    # Defect: the Python API stores any bucket; two of one op and dtype whose values differ in
    # type (int and str) broke show's sort with a traceback.
    from flashtune.cache import ProblemKey

    path = tmp_path / "tuned.sqlite"
    _store(f"sqlite:///{path}", ProblemKey.make("softmax", "float16", {"rows_bucket": 8, "cols_bucket": 64}),
           ProblemKey.make("softmax", "float16", {"rows_bucket": "8", "cols_bucket": 64}))
    rc, out, err = _cli(capsys, "show", "--all-devices", "--db", str(path))
    assert rc == 0 and "Traceback" not in err, err
    assert "winners for all devices: 2" in out


@pytest.mark.parametrize("column", ["op", "config", "flashtune_version", "tuned_at", "device_name"])
def test_text_that_is_not_utf8_spoils_only_its_row(tmp_path, capsys, column):
    # Defect: sqlite3 raised "Could not decode to UTF-8" for the whole query, so one damaged
    # row dropped every winner at run time and made show and export fail.
    path = tmp_path / "tuned.sqlite"
    _store(f"sqlite:///{path}", key_for(4096), key_for(8192))
    conn = sqlite3.connect(path)
    with conn:
        assert conn.execute(f"UPDATE ft_v1_winners SET {column} = CAST(x'ff41' AS TEXT) "
                            "WHERE bucket = ?", (key_for(8192).bucket_json(),)).rowcount == 1
    conn.close()
    winners, said = _runtime(f"sqlite:///{path}")
    if column == "device_name":  # another device's row now: not this device's to read
        assert [w.key for w in winners] == [key_for(4096)] and said == []
    else:
        assert [w.key for w in winners] == [key_for(4096)]
        assert len(said) == 1 and "skipped 1 invalid winner row" in said[0], said
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", CacheWarning)
        with TuneDB(path, read_only=True) as db:
            assert [w.key for w in db.winners()] == [key_for(4096)]
    rc, out, err = _cli(capsys, "show", "--all-devices", "--db", str(path))
    assert rc == 0 and "Traceback" not in err and "winners for all devices: 1" in out, err


# -- "~" in an SQLite URL ------------------------------------------------------------------------

def test_tilde_in_an_sqlite_url_is_the_home_folder(tmp_path, monkeypatch):
    # Defect: FLASHTUNE_DB=sqlite:///~/x.sqlite made a folder literally named "~" under the
    # current one (a plain path and --journal expanded it already).
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.chdir(tmp_path)
    url = engine_mod.resolve_url("sqlite:///~/ft/tuned.sqlite")
    assert url.database == str(tmp_path / "ft" / "tuned.sqlite")
    _store("sqlite:///~/ft/tuned.sqlite")
    assert (tmp_path / "ft" / "tuned.sqlite").is_file() and not (tmp_path / "~").exists()
    assert engine_mod.resolve_url("~/ft/tuned.sqlite").database == url.database


def _deny_writes_to(path, monkeypatch) -> None:
    """os.access says ``path`` may not be written, as on a read-only mount (root included)."""
    real_access = os.access

    def access(target, mode, *args, **kwargs):
        if os.fspath(target) == str(path) and mode & os.W_OK:
            return False
        return real_access(target, mode, *args, **kwargs)

    monkeypatch.setattr(engine_mod.os, "access", access)


def test_writers_refuse_a_database_file_they_may_not_write(tmp_path, capsys, monkeypatch):
    # Defect (audit): on a database file this user may not write (read-only storage, mode
    # 0444), `flashtune clear` said "would delete N winner(s) ...; run again with --yes"
    # (exit 1), and --yes then failed, blaming the folder. A ?mode=ro URL was already refused
    # up front; a read-only file is refused alike.
    path = tmp_path / "tuned.sqlite"
    _store(f"sqlite:///{path}")
    _deny_writes_to(path, monkeypatch)
    before = path.read_bytes()
    for argv in (["clear"], ["clear", "--yes"], ["import", str(tmp_path / "none.json")]):
        rc, out, err = _cli(capsys, *argv, "--db", str(path))
        assert rc == 2 and "would delete" not in out, (argv, out, err)
        assert f"{path} is read-only" in err and "may not write" in err, err
        _one_line_error(err, argv[0])
    assert path.read_bytes() == before


def test_a_read_only_default_database_is_not_called_flashtune_db(tmp_path, capsys, monkeypatch):
    # Defect: with FLASHTUNE_DB unset, a read-only default database (tuned.sqlite in a cache
    # folder on read-only storage) was refused as "FLASHTUNE_DB=/.../tuned.sqlite is
    # read-only", naming a setting the user never made.
    monkeypatch.delenv("FLASHTUNE_DB", raising=False)
    monkeypatch.setenv("FLASHTUNE_CACHE_DIR", str(tmp_path))
    path = tmp_path / "tuned.sqlite"
    _store(f"sqlite:///{path}")
    _deny_writes_to(path, monkeypatch)
    for argv in (["clear", "--yes"], ["import", str(tmp_path / "none.json")]):
        rc, _, err = _cli(capsys, *argv)
        assert rc == 2 and f"{path} is read-only" in err, err
        assert "FLASHTUNE_DB=" not in err and "FLASHTUNE_CACHE_DIR" in err, err
    with pytest.raises(CacheError) as raised:
        TuneDB()
    assert "FLASHTUNE_DB=" not in str(raised.value)
    monkeypatch.setenv("FLASHTUNE_DB", str(path))  # set: then named, as before
    rc, _, err = _cli(capsys, "clear", "--yes")
    assert rc == 2 and f"FLASHTUNE_DB={path} is read-only" in err, err


def test_export_to_a_path_that_names_a_folder_writes_no_file(tmp_path, capsys):
    # Defect (audit): pathlib drops a trailing "/" and a final "/.", so `flashtune export
    # new/` made a file named "new" (where cp says "Not a directory"), and `flashtune export
    # old.json/` or `old.json/.` replaced the file old.json.
    path = tmp_path / "tuned.sqlite"
    _store(f"sqlite:///{path}")
    old = tmp_path / "old.json"
    old.write_text("old")
    for target in (f"{tmp_path / 'new'}/", f"{old}/", f"{old}/."):
        rc, _, err = _cli(capsys, "export", target, "--db", str(path))
        assert rc == 2 and "names a folder" in err, (target, err)
        _one_line_error(err, "export")
    assert not (tmp_path / "new").exists() and old.read_text() == "old"
    # an existing folder given so is still "a folder" (no file made in it either)
    rc, _, err = _cli(capsys, "export", f"{tmp_path}/", "--db", str(path))
    assert rc == 2 and "folder" in err, err


# -- a huge value in a hostile row or import file is not quoted whole -----------------------------

HUGE_TEXT = "x" * 1_000_000


def test_a_huge_value_in_a_row_does_not_flood_the_warning(tmp_path, capsys):
    # Defect: a skipped row's warning quoted its bucket, and a config value, whole: a 20 MB
    # bucket written behind flashtune's back made a 20 MB CacheWarning at a model's first
    # call (kept for good in the warned-once set), and as much on `flashtune show`'s stderr.
    path = tmp_path / "tuned.sqlite"
    url = f"sqlite:///{path}"
    _store(url, key_for(64), key_for(128))
    _set_config(path, 64, json.dumps(dict(row_config(), regime=HUGE_TEXT)))
    _set_column(path, 128, "bucket", json.dumps({"rows_bucket": HUGE_TEXT}))
    winners, said = _runtime(url)
    assert winners == [] and len(said) == 1 and "skipped 2 invalid" in said[0]
    assert len(said[0]) < 2000, len(said[0])
    with warnings.catch_warnings(record=True) as caught:  # _cli would hide it
        warnings.simplefilter("always")
        rc = main(["show", "--all-devices", "--db", str(path)])
    shown = [str(w.message) for w in caught if issubclass(w.category, CacheWarning)]
    # (show serves any bucket, marked "ignored": the config row is the one it skips)
    assert rc == 0 and len(shown) == 1 and "skipped 1 invalid" in shown[0]
    assert len(shown[0]) < 2000, len(shown[0])


@pytest.mark.parametrize("field", ["op", "tuned_at"])
def test_a_huge_value_in_an_import_file_does_not_flood_the_error(tmp_path, capsys, field):
    # Defect: the rejected row's label and reason quoted the value whole: an op name of
    # 30 MB in an export file made a 60 MB error message (the label and "unknown op").
    doc = _export_doc(tmp_path)
    doc["winners"][0][field] = HUGE_TEXT
    target = tmp_path / "in.json"
    target.write_text(json.dumps(doc))
    rc, _, err = _cli(capsys, "import", str(target), "--db", str(tmp_path / "dst.sqlite"))
    assert rc == 2 and "winners[0]" in err and len(err) < 2000, len(err)
    if field == "tuned_at":  # a known op with another family hash (the test's): still said
        assert "(tuned on other templates" in err
    _one_line_error(err, "import")


def test_control_characters_in_a_row_are_spelled_out_in_the_warning(tmp_path):
    # Defect: a skipped row's warning quoted its fields as stored: a terminal escape written
    # into a shared database (ESC [2J clears the screen) reached the user's terminal raw at a
    # model's first call; `flashtune show` already spelled such characters out.
    path = tmp_path / "tuned.sqlite"
    url = f"sqlite:///{path}"
    _store(url, key_for(64))
    _set_column(path, 64, "bucket", '{"rows_bucket": "\x1b[2J\x07"}')  # raw, not JSON-escaped
    winners, said = _runtime(url)
    assert winners == [] and len(said) == 1 and "skipped 1 invalid" in said[0]
    assert "\x1b" not in said[0] and "\x07" not in said[0]
    assert "\\x1b[2J" in said[0]
