"""What goes wrong with a database: corrupt, unreachable, foreign, locked, tampered.

The tuning path (TuneDB) raises CacheError with a clear message; the runtime path
(read_runtime_winners) returns [] and warns exactly once, never raising into a user's model.
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import sqlite3
import stat
import warnings

import pytest
from sqlalchemy import text

from flashtune.cache import CacheError, CacheWarning, TuneDB, read_runtime_winners
from flashtune.cache import runtime as runtime_mod
from flashtune.gen import render_variant
from test_cache_support import (_NO_PG, DEV, FAMILY, KEY, PG_URL, db_url, key_for,  # noqa: F401
                                raw_engine, row_config, sqlite_url, unsearchable)


def _store(db, config=None, median=1.0, key=KEY):
    db.upsert_winner(DEV, FAMILY, key, config or row_config(), median_ms=median,
                     p20_ms=median, p80_ms=median, trials=1)


def _runtime_twice(url) -> tuple[list, list[str]]:
    """Two runtime reads; their results and every CacheWarning they gave."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        first = read_runtime_winners(DEV, url)
        second = read_runtime_winners(DEV, url)
    assert first == second
    return first, [str(w.message) for w in caught if issubclass(w.category, CacheWarning)]


# -- a corrupt file ---------------------------------------------------------------------------

@pytest.fixture
def corrupt_file(tmp_path):
    path = tmp_path / "tuned.sqlite"
    path.write_bytes(random.Random(1234).randbytes(8192))
    return path


def test_corrupt_file_tuning_path(corrupt_file):
    before = corrupt_file.read_bytes()
    with pytest.raises(CacheError, match="not a readable SQLite database") as caught:
        TuneDB(f"sqlite:///{corrupt_file}")
    assert str(corrupt_file) in str(caught.value)
    assert corrupt_file.read_bytes() == before  # never "repaired" by overwriting


def test_corrupt_file_runtime_path(corrupt_file):
    winners, said = _runtime_twice(f"sqlite:///{corrupt_file}")
    assert winners == [] and len(said) == 1
    assert "not a readable SQLite database" in said[0] and "default kernels" in said[0]
    # one sentence: explain()'s advice ends with a period, which "; ..." followed (".;")
    assert ".;" not in said[0], said[0]


@pytest.mark.parametrize("damage", ["corrupt", "missing"])
def test_runtime_notice_raises_where_warnings_are_errors(corrupt_file, damage):
    # Defect (README audit): README says that where warnings are made errors (python -W
    # error) the fallback notice raises like any other warning. For a corrupt file the
    # notice raised inside the read was caught by its own catch-all, whose second notice
    # (same database, same kind) was taken as already said: no error and no warning at all.
    # A missing file raised, but as a second notice wrapping the first ("CacheWarning: ...").
    if damage == "missing":
        corrupt_file.unlink()
    with warnings.catch_warnings():
        warnings.simplefilter("error", CacheWarning)
        with pytest.raises(CacheWarning) as caught:
            read_runtime_winners(DEV, f"sqlite:///{corrupt_file}")
    expected = "not a readable SQLite database" if damage == "corrupt" else "does not exist"
    assert expected in str(caught.value) and "CacheWarning" not in str(caught.value)


# -- a folder that cannot exist ---------------------------------------------------------------

@pytest.fixture
def impossible_path(tmp_path):
    # A path below a regular file: no user (root included) can create that folder.
    blocker = tmp_path / "a_file"
    blocker.write_text("not a folder")
    return blocker / "sub" / "tuned.sqlite"


def test_unwritable_folder_tuning_path(impossible_path):
    # Named as the readers name it (the file on the path), no longer "cannot create the
    # folder ...: Not a directory".
    with pytest.raises(CacheError, match="cannot exist: a part of its path is not a folder") \
            as caught:
        TuneDB(f"sqlite:///{impossible_path}")
    assert str(impossible_path) in str(caught.value)
    assert f"({impossible_path.parent.parent})" in str(caught.value)


def test_unwritable_folder_runtime_path(impossible_path):
    winners, said = _runtime_twice(f"sqlite:///{impossible_path}")
    assert winners == [] and len(said) == 1 and str(impossible_path) in said[0]


def test_runtime_never_creates_a_database(tmp_path):
    path = tmp_path / "never" / "tuned.sqlite"
    winners, said = _runtime_twice(str(path))
    assert winners == [] and len(said) == 1 and "flashtune tune" in said[0]
    assert not path.parent.exists()


def test_runtime_survives_an_unreachable_server():
    url = "postgresql+psycopg2://nobody@127.0.0.1:9/none"  # port 9: nothing listens
    pytest.importorskip("psycopg2")
    winners, said = _runtime_twice(url)
    assert winners == [] and len(said) == 1


def test_runtime_survives_bad_arguments():
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert read_runtime_winners("H100", "sqlite:///:memory:") == []
        assert read_runtime_winners(DEV, "mysql://x@y/z") == []
    assert len([w for w in caught if issubclass(w.category, CacheWarning)]) == 2


# -- other schema versions --------------------------------------------------------------------

_OLD_TABLES = (
    "CREATE TABLE ft_v0_winners (op VARCHAR(64), config TEXT, median_ms FLOAT)",
    "INSERT INTO ft_v0_winners VALUES ('softmax', '{\"block\": 64}', 0.001)",
    "CREATE TABLE ft_v2_winners (anything TEXT)",
)


def _execute_raw(url, *statements: str) -> None:
    """Run fixed test statements on the database behind flashtune's back, in one transaction."""
    engine = raw_engine(url)
    with engine.begin() as conn:
        for statement in statements:
            conn.execute(text(statement))
    engine.dispose()


def _add_other_versions(url):
    _execute_raw(url, *_OLD_TABLES)


def test_other_schema_versions_tuning_path(db_url):
    _add_other_versions(db_url)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with TuneDB(db_url) as db:
            assert db.winners() == []  # the v0 row is never read as a v1 winner
            _store(db, median=2.0)
        with TuneDB(db_url) as db:  # said once per process, not per open
            assert [w.median_ms for w in db.winners()] == [2.0]
    said = [str(w.message) for w in caught if issubclass(w.category, CacheWarning)]
    assert len(said) == 1 and "v0" in said[0] and "v2" in said[0] and "leaves them alone" in said[0]
    # said at the user's TuneDB(...) (stacklevel through flashtune.once), not inside flashtune
    assert [w.filename for w in caught if issubclass(w.category, CacheWarning)] == [__file__]
    engine = raw_engine(db_url)
    with engine.connect() as conn:  # left alone
        assert conn.execute(text("SELECT count(*) FROM ft_v0_winners")).scalar() == 1
    engine.dispose()


def test_other_schema_versions_runtime_path(db_url):
    _add_other_versions(db_url)
    winners, said = _runtime_twice(db_url)
    assert winners == [] and len(said) == 1
    assert "no flashtune schema v1 winners table" in said[0] and "v0" in said[0]


def _add_foreign_v1_table(url):
    _execute_raw(url, "CREATE TABLE ft_v1_winners (op VARCHAR(64), config TEXT)")


def test_foreign_layout_tuning_path(db_url):
    """A table with this version's name but another layout was not written by us."""
    _add_foreign_v1_table(db_url)
    with pytest.raises(CacheError, match="ft_v1_winners does not have the schema v1 layout"):
        TuneDB(db_url)


@pytest.mark.parametrize("table", ["ft_v1_winners", "ft_v1_trials"])
def test_a_view_with_this_versions_table_name_tuning_path(db_url, table):
    # Defect: CREATE TABLE IF NOT EXISTS passes over a view of the same name, so the tuner
    # opened such a database and failed at its first write ("cannot modify ... because it is a
    # view"), after the first trial's compile and measurement, not when it opened it.
    _execute_raw(db_url, f"CREATE VIEW {table} AS SELECT 1 AS x")  # fixed names only
    with pytest.raises(CacheError, match=f"{table} is a view"):
        TuneDB(db_url)


def test_foreign_layout_runtime_path(db_url):
    _add_foreign_v1_table(db_url)
    winners, said = _runtime_twice(db_url)
    assert winners == [] and len(said) == 1 and "ft_v1_winners" in said[0]


def _add_mistyped_v1_table(url):
    """This version's column names and primary key, but the times (and the date) as text."""
    _execute_raw(url, "CREATE TABLE ft_v1_winners (config TEXT, median_ms TEXT, p20_ms TEXT, "
                 "p80_ms TEXT, trials INTEGER, flashtune_version TEXT, tuned_at TEXT, "
                 "device_name TEXT, capability TEXT, sm_count INTEGER, triton_version TEXT, "
                 "family_hash TEXT, op TEXT, dtype TEXT, bucket TEXT, PRIMARY KEY (device_name, "
                 "capability, sm_count, triton_version, family_hash, op, dtype, bucket))")


def test_mistyped_columns_tuning_path(db_url):
    """Defect: only column names and the primary key were compared. With the times in text
    columns, `flashtune tune` and `import` reported winners stored (SQLite kept them as text)
    that every reader then skipped as invalid rows, on every re-run."""
    _add_mistyped_v1_table(db_url)
    with pytest.raises(CacheError, match=r"ft_v1_winners does not have the schema v1 layout "
                                         r"\(median_ms is text, not number"):
        TuneDB(db_url)


def test_mistyped_columns_runtime_path(db_url):
    _add_mistyped_v1_table(db_url)
    winners, said = _runtime_twice(db_url)
    assert winners == [] and len(said) == 1 and "median_ms is text, not number" in said[0]


def test_our_own_tables_pass_the_type_check(db_url):
    with TuneDB(db_url) as db:
        _store(db, median=2.0)
    with TuneDB(db_url) as db:  # reopened: the reflected types of our own tables
        assert [w.median_ms for w in db.winners()] == [2.0]


def _edit_schema(path, statement: str) -> None:
    """Change sqlite_master itself, as a corrupt file or another program could have it."""
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA journal_mode=DELETE")
    conn.execute("PRAGMA writable_schema=ON")
    conn.execute(statement)  # fixed test statements only
    conn.close()


_NOT_UTF8 = {
    # a column type that is not UTF-8: SQLAlchemy's type parser got bytes ("cannot use a
    # string pattern on a bytes-like object")
    "column type": ("UPDATE sqlite_master SET sql = replace(sql, 'median_ms FLOAT', "
                    "'median_ms ' || CAST(X'464CFF4154' AS TEXT)) WHERE name = 'ft_v1_winners'",
                    "column types cannot be read"),
    # a table name that is not UTF-8 in SQL that does not parse: sqlite3 could not decode
    # SQLite's own message ("'utf-8' codec can't decode byte 0xff")
    "schema message": ("UPDATE sqlite_master SET name = CAST(X'FF' AS TEXT), "
                       "sql = 'CREATE TABIE x(a)' WHERE name = 'ft_v1_trials'",
                       "holds text that is not UTF-8"),
}


@pytest.mark.parametrize("case", sorted(_NOT_UTF8))
def test_schema_text_that_is_not_utf8_is_named_as_a_database_problem(sqlite_url, tmp_path, case):
    """Defect: the tuner, `import` and `show` said only "error: cannot use a string pattern on
    a bytes-like object" or "'utf-8' codec can't decode byte 0xff" (not naming the database),
    and the runtime's one warning carried the same words."""
    with TuneDB(sqlite_url) as db:
        _store(db, median=2.0)
    statement, words = _NOT_UTF8[case]
    _edit_schema(tmp_path / "tuned.sqlite", statement)
    with pytest.raises(CacheError, match=words) as caught:
        TuneDB(sqlite_url)
    assert str(tmp_path / "tuned.sqlite") in str(caught.value)
    winners, said = _runtime_twice(sqlite_url)
    assert winners == [] and len(said) == 1 and words in said[0], said


# -- a locked database ------------------------------------------------------------------------

def test_locked_database_tuning_path(sqlite_url, tmp_path):
    with TuneDB(sqlite_url, timeout=0.2) as db:
        _store(db, median=2.0)
        holder = sqlite3.connect(tmp_path / "tuned.sqlite", isolation_level=None)
        holder.execute("BEGIN IMMEDIATE")  # another writer holds the write lock
        try:
            with pytest.raises(CacheError, match="locked by another process"):
                _store(db, median=1.0)
            # WAL: a reader is not blocked by a writer
            assert [w.median_ms for w in read_runtime_winners(DEV, sqlite_url)] == [2.0]
        finally:
            holder.execute("ROLLBACK")
            holder.close()
        _store(db, median=1.0)  # works once the lock is gone
        assert db.winner(DEV, FAMILY, KEY).median_ms == 1.0


@contextlib.contextmanager
def _readers_locked_out(path):
    """Another process's exclusive transaction on the SQLite file at ``path``: in exclusive
    locking mode it keeps even readers out until the body is done."""
    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute("PRAGMA locking_mode=EXCLUSIVE")
    holder.execute("BEGIN EXCLUSIVE")
    try:
        yield
    finally:
        holder.execute("ROLLBACK")
        holder.close()


def test_locked_database_runtime_path(sqlite_url, tmp_path, monkeypatch):
    with TuneDB(sqlite_url) as db:
        _store(db)
    monkeypatch.setattr(runtime_mod, "RUNTIME_TIMEOUT_S", 0.1)
    with _readers_locked_out(tmp_path / "tuned.sqlite"):
        winners, said = _runtime_twice(sqlite_url)
    assert winners == [] and len(said) == 1 and "locked" in said[0]
    assert ".;" not in said[0], said[0]


def test_a_later_different_trouble_is_said_too(sqlite_url, tmp_path, monkeypatch):
    """Defect: the notice was once per database and kind, and every read error was one kind:
    told the database was locked ("retry when the other tuning run is done"), a user who then
    called flashtune.dispatch.reset() on a database corrupted meanwhile got the default
    kernels with no word. Each trouble is said once; the same trouble again is not."""
    with TuneDB(sqlite_url) as db:
        _store(db)
    monkeypatch.setattr(runtime_mod, "RUNTIME_TIMEOUT_S", 0.1)
    with _readers_locked_out(tmp_path / "tuned.sqlite"):
        _, locked = _runtime_twice(sqlite_url)
    assert len(locked) == 1 and "locked" in locked[0], locked
    for name in ("tuned.sqlite-wal", "tuned.sqlite-shm"):
        (tmp_path / name).unlink(missing_ok=True)
    (tmp_path / "tuned.sqlite").write_bytes(random.Random(1234).randbytes(8192))
    winners, corrupt = _runtime_twice(sqlite_url)
    assert winners == [] and len(corrupt) == 1, corrupt
    assert "not a readable SQLite database" in corrupt[0], corrupt[0]


# -- a write another program left unfinished -------------------------------------------------

_KILLED_WRITER = """
import os, signal, sqlite3, sys
conn = sqlite3.connect(sys.argv[1], isolation_level=None)
conn.execute("PRAGMA journal_mode=DELETE")  # a rollback journal, as many SQLite tools use
conn.execute("PRAGMA cache_size=1")  # changed pages reach the database file before the commit
conn.execute("BEGIN IMMEDIATE")
conn.execute("UPDATE ft_v1_winners SET trials = trials + 1")
conn.execute("CREATE TABLE junk (x)")
conn.execute("INSERT INTO junk SELECT zeroblob(2000) FROM (WITH RECURSIVE r(i) AS "
             "(SELECT 1 UNION ALL SELECT i + 1 FROM r WHERE i < 200) SELECT i FROM r)")
os.kill(os.getpid(), signal.SIGKILL)  # killed mid-transaction: its journal stays, hot
"""


@pytest.fixture
def hot_journal(tmp_path):
    import subprocess
    import sys

    path = tmp_path / "tuned.sqlite"
    with TuneDB(str(path)) as db:
        _store(db)
    subprocess.run([sys.executable, "-c", _KILLED_WRITER, str(path)], check=False)
    journal = tmp_path / "tuned.sqlite-journal"
    assert journal.stat().st_size > 0
    return path


def test_hot_journal_is_named_as_such(hot_journal, capsys):
    """Defect: a rollback journal left by another program's unfinished write (SQLite must roll
    it back before anyone reads, which a read-only reader may not do) was reported as "its
    folder is missing or not writable", in a folder anyone could write."""
    from cli_helpers import run_cli

    winners, said = _runtime_twice(str(hot_journal))
    assert winners == [] and len(said) == 1 and "default kernels" in said[0]  # the fallback
    rc, _, err = run_cli(capsys, "show", "--db", str(hot_journal))
    assert rc == 2
    for message in (said[0], err):
        assert "tuned.sqlite-journal" in message and "unfinished write" in message, message
        assert "not writable" not in message, message
    assert (hot_journal.parent / "tuned.sqlite-journal").exists()  # a reader changes nothing
    # the advice works: opening it with write access rolls the write back
    sqlite3.connect(hot_journal).execute("SELECT count(*) FROM sqlite_master").fetchall()
    assert [w.trials for w in read_runtime_winners(DEV, str(hot_journal))] == [1]


def test_a_folder_in_place_of_the_wal_or_shm_file_is_named(tmp_path, capsys):
    """Defect: a folder where SQLite keeps the database's -wal file (readers and writers fail)
    or -shm file (writers fail) was reported as "its folder is missing or not writable", in a
    folder anyone could write."""
    from cli_helpers import run_cli

    path = tmp_path / "tuned.sqlite"
    with TuneDB(str(path)) as db:
        _store(db)
    named = "where SQLite keeps a file of the database, is a folder"
    (tmp_path / "tuned.sqlite-wal").mkdir()
    winners, said = _runtime_twice(str(path))
    assert winners == [] and len(said) == 1 and "default kernels" in said[0]  # the fallback
    rc, _, err = run_cli(capsys, "show", "--db", str(path))
    assert rc == 2
    for message in (said[0], err):
        assert f"tuned.sqlite-wal, {named}" in message and "not writable" not in message, message
    (tmp_path / "tuned.sqlite-wal").rmdir()
    (tmp_path / "tuned.sqlite-shm").mkdir()
    with pytest.raises(CacheError, match=f"tuned.sqlite-shm, {named}"):
        with TuneDB(str(path)) as db:
            _store(db, median=0.5)


def _within(seconds: float, release, fn, *args):
    """fn(*args) in a thread, which must end within ``seconds``; else ``release()`` frees it
    (so that no blocked thread outlives the test) and the test fails."""
    import threading

    result: list = []
    failure: list = []

    def run():
        try:
            result.append(fn(*args))
        except BaseException as err:  # noqa: BLE001 - handed to the test
            failure.append(err)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(seconds)
    if thread.is_alive():
        release()
        thread.join(seconds)
        pytest.fail(f"{getattr(fn, '__name__', fn)} hung (> {seconds} s)")
    if failure:
        raise failure[0]
    return result[0]


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs named pipes")
def test_a_pipe_in_place_of_the_rollback_journal_hangs_nothing(tmp_path, capsys):
    """Defect: a named pipe where SQLite looks for the database's rollback journal
    (tuned.sqlite-journal) hung every reader forever, a user's model at its first call
    included: before its first read SQLite opens a journal it finds there (to roll back an
    unfinished write), even for a WAL database and read-only, and opening a pipe waits for a
    writer. The runtime must fall back with one warning, and commands refuse, naming it."""
    from cli_helpers import run_cli

    path = tmp_path / "tuned.sqlite"
    with TuneDB(str(path)) as db:
        _store(db)
    journal = tmp_path / "tuned.sqlite-journal"
    os.mkfifo(journal)

    def release():  # a blocked open of the pipe for reading returns once a writer comes
        os.close(os.open(journal, os.O_WRONLY | os.O_NONBLOCK))

    winners, said = _within(20, release, _runtime_twice, str(path))
    assert winners == [] and len(said) == 1 and "default kernels" in said[0], said
    assert "tuned.sqlite-journal" in said[0], said[0]
    rc, _, err = _within(20, release, run_cli, capsys, "show", "--db", str(path))
    assert rc == 2 and "tuned.sqlite-journal" in err, err
    with pytest.raises(CacheError, match="tuned.sqlite-journal"):
        _within(20, release, TuneDB, str(path))


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs named pipes")
def test_a_pipe_in_place_of_an_sqlite_journal_urls_rollback_journal_hangs_nothing(tmp_path,
                                                                                  capsys):
    """Defect: `flashtune tune --journal sqlite:///F` with a named pipe at F-journal hung
    forever in Optuna's opening of F (SQLite opens the pipe to roll back an unfinished write,
    and waits for a writer), as the winner database did before blocked_journal; it is refused
    before Optuna opens F, naming the pipe."""
    from cli_helpers import run_cli

    path = tmp_path / "study.sqlite"
    with sqlite3.connect(path) as conn:  # an existing database: SQLite looks for its journal
        conn.execute("CREATE TABLE t (x INTEGER)")
    conn.close()
    journal = tmp_path / "study.sqlite-journal"
    os.mkfifo(journal)

    def release():  # a blocked open of the pipe for reading returns once a writer comes
        os.close(os.open(journal, os.O_WRONLY | os.O_NONBLOCK))

    rc, _, err = _within(20, release, run_cli, capsys, "tune", "--interpret", "--problem",
                         "softmax:float32:4x100", "--journal", f"sqlite:///{path}",
                         "--db", str(tmp_path / "t.sqlite"))
    lines = err.strip().splitlines()
    assert rc == 2 and len(lines) == 1, err
    assert lines[0].startswith("flashtune tune: error: --journal "), err
    assert "study.sqlite-journal" in lines[0] and "not a regular file" in lines[0], err
    assert stat.S_ISFIFO(os.lstat(journal).st_mode)  # left alone


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs named pipes")
def test_a_pipe_in_place_of_the_shm_file_is_named(tmp_path, capsys):
    """Defect: a named pipe where SQLite keeps a WAL database's -shm file made every read fail
    with a bare "disk I/O error" (the runtime's warning and `flashtune show`): nothing said
    which file was wrong, or what to do."""
    from cli_helpers import run_cli

    path = tmp_path / "tuned.sqlite"
    with TuneDB(str(path)) as db:
        _store(db)
    os.mkfifo(tmp_path / "tuned.sqlite-shm")
    winners, said = _runtime_twice(str(path))
    assert winners == [] and len(said) == 1 and "default kernels" in said[0], said
    rc, _, err = run_cli(capsys, "show", "--db", str(path))
    assert rc == 2
    for message in (said[0], err):
        assert "tuned.sqlite-shm, where SQLite keeps a file of the database" in message, message


def test_a_database_that_cannot_be_looked_at_is_not_called_missing(tmp_path, monkeypatch):
    """Defect: the runtime said a winner database "does not exist (run `flashtune tune` ...)"
    where it could not look at it: a symbolic link loop at its path, or a folder on its path
    this user may not search (a team's database in another user's folder). Tuning would not
    help; the warning must say what is wrong."""
    loop = tmp_path / "loop.sqlite"
    loop.symlink_to(loop)
    (winners, said) = _runtime_twice(str(loop))
    assert winners == [] and len(said) == 1 and "default kernels" in said[0], said
    assert "symbolic link loop" in said[0] and "does not exist" not in said[0], said[0]

    hidden = tmp_path / "private" / "tuned.sqlite"  # as if "private" were mode 0o700, not ours
    unsearchable(monkeypatch, hidden)
    (winners, said) = _runtime_twice(str(hidden))
    assert winners == [] and len(said) == 1 and "default kernels" in said[0], said
    assert "permission denied" in said[0] and "does not exist" not in said[0], said[0]
    assert "flashtune tune" not in said[0], said[0]


def test_a_cache_folder_that_is_a_file_is_named_not_called_a_missing_database(
        tmp_path, monkeypatch, capsys):
    """Defect (audit): FLASHTUNE_CACHE_DIR naming a regular file (FLASHTUNE_DB unset) made the
    runtime say ".../afile/tuned.sqlite does not exist (run `flashtune tune`, ...)" and
    `flashtune show` "no winner database at ... (run `flashtune tune` first)": the database
    cannot exist there, tuning would not help; the file on the path is what is wrong."""
    from cli_helpers import run_cli

    afile = tmp_path / "afile"
    afile.write_text("not a folder")
    monkeypatch.delenv("FLASHTUNE_DB", raising=False)
    monkeypatch.setenv("FLASHTUNE_CACHE_DIR", str(afile))
    (winners, said) = _runtime_twice(None)
    assert winners == [] and len(said) == 1 and "default kernels" in said[0], said
    assert f"a part of its path is not a folder ({afile})" in said[0], said[0]
    assert "FLASHTUNE_CACHE_DIR" in said[0], said[0]
    rc, _, err = run_cli(capsys, "show")
    for message in (said[0], err):
        assert "does not exist" not in message and "flashtune tune" not in message, message
    assert rc == 2 and "a part of its path is not a folder" in err, err


def test_a_database_file_this_user_may_not_read_is_named(tmp_path, monkeypatch):
    """Defect: a database file this user may not read (mode 0o600 of another user, in a
    folder anyone may write) was explained as "its folder is missing or not writable". (Faked
    with os.access: the suite may run as root, who reads any file.)"""
    from flashtune.cache.engine import explain, resolve_url

    path = tmp_path / "tuned.sqlite"
    with TuneDB(str(path)) as db:
        _store(db)
    real_access = os.access
    monkeypatch.setattr(os, "access", lambda p, mode, *a, **k: False if os.fspath(p) == str(path)
                        else real_access(p, mode, *a, **k))
    err = sqlite3.OperationalError("unable to open database file")
    message = explain(err, resolve_url(str(path)), 1.0)
    assert "may not read" in message and "not writable" not in message, message


def test_hot_journal_is_named_without_sqlite_error_names(hot_journal):
    """Python 3.10's sqlite3 errors carry no error name: the journal beside the file says it."""
    from flashtune.cache.engine import explain, resolve_url

    err = sqlite3.OperationalError("attempt to write a readonly database")  # no sqlite_errorname
    assert "unfinished write" in explain(err, resolve_url(str(hot_journal)), 1.0)


def test_hot_journal_advice_quotes_the_path(tmp_path):
    """The suggested `sqlite3 PATH 'PRAGMA quick_check'` must run as printed: a path with a
    space (or a quote) split into several shell words, none of them the database."""
    import shlex

    from flashtune.cache.engine import explain, resolve_url

    path = tmp_path / "team's db" / "tuned.sqlite"
    path.parent.mkdir()
    path.write_bytes(b"")
    (path.parent / "tuned.sqlite-journal").write_bytes(b"x" * 512)
    err = sqlite3.OperationalError("attempt to write a readonly database")
    said = explain(err, resolve_url(str(path)), 1.0)
    command = said.split("`")[1]
    assert shlex.split(command) == ["sqlite3", str(path), "PRAGMA quick_check"], said


# -- rows tampered with behind flashtune's back -----------------------------------------------

_TAMPERED_CONFIGS = {
    "injection": row_config(block="64; import os"),
    "outside the space": row_config(block=48),
    "unknown key": {**row_config(), "evil": 1},
}


def _tamper(url, sql: str, **params):
    engine = raw_engine(url)
    with engine.begin() as conn:
        assert conn.execute(text(sql), params).rowcount == 1
    engine.dispose()


def _tampered_db(url):
    """One valid winner plus one tampered row per entry of _TAMPERED_CONFIGS (and bad JSON)."""
    import json

    buckets = {}
    with TuneDB(url) as db:
        _store(db, row_config(), key=KEY)
        for i, name in enumerate(list(_TAMPERED_CONFIGS) + ["not json"]):
            key = key_for(2 ** (i + 1))
            _store(db, row_config(), key=key)
            buckets[name] = key.bucket_json()
    for name, bucket in buckets.items():
        bad = "{not json" if name == "not json" else json.dumps(_TAMPERED_CONFIGS[name])
        _tamper(url, "UPDATE ft_v1_winners SET config = :config WHERE bucket = :bucket",
                config=bad, bucket=bucket)
    return buckets


def test_tampered_rows_are_skipped_by_winners(db_url):
    _tampered_db(db_url)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with TuneDB(db_url) as db:
            winners = db.winners()
            single = db.winner(DEV, FAMILY, key_for(2))
    assert [w.key for w in winners] == [KEY] and single is None
    said = [str(w.message) for w in caught if issubclass(w.category, CacheWarning)]
    assert len(said) == 2  # one per read, however many rows were bad
    assert "skipped 4 invalid winner row(s)" in said[0]
    assert "64; import os" in said[0] and "outside the space" in said[0] and "unknown keys" in said[0]


def test_tampered_rows_never_reach_the_renderer(db_url, monkeypatch):
    _tampered_db(db_url)
    from flashtune.gen import render as render_mod

    rendered = []
    real = render_mod.render
    monkeypatch.setattr(render_mod, "render",
                        lambda *a, **k: rendered.append(a) or real(*a, **k))
    winners, said = _runtime_twice(db_url)
    assert len(said) == 1 and "skipped 4 invalid winner row(s)" in said[0]
    assert [w.config for w in winners] == [row_config()]
    for w in winners:  # what a dispatcher does with them
        source = render_variant(w.key.op, w.config).source
        assert "import os" not in source
    assert all("import os" not in repr(args) for args in rendered)


def test_a_new_winner_replaces_a_tampered_row_whatever_its_median(db_url):
    # Defect: the faster-wins rule compared the new winner with a stored row no reader can use
    # (its config edited outside the space, its median still tiny): the row stayed, the tune
    # said "winners stored", and no re-tune or import ever gave the problem a usable winner.
    buckets = _tampered_db(db_url)
    bucket = buckets["outside the space"]
    _tamper(db_url, "UPDATE ft_v1_winners SET median_ms = 0.001, p20_ms = 0.001, "
                    "p80_ms = 0.001 WHERE bucket = :bucket", bucket=bucket)
    key = key_for(4)  # the second of _tampered_db's rows
    assert key.bucket_json() == bucket
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", CacheWarning)
        with TuneDB(db_url) as db:
            assert db.upsert_winner(DEV, FAMILY, key, row_config(warps=4), median_ms=5.0,
                                    p20_ms=5.0, p80_ms=5.0, trials=3)
            stored = db.winner(DEV, FAMILY, key)
            assert stored is not None and stored.config == row_config(warps=4)
            # a valid stored winner keeps the faster-wins rule
            assert not db.upsert_winner(DEV, FAMILY, key, row_config(warps=2), median_ms=6.0,
                                        p20_ms=6.0, p80_ms=6.0, trials=3)


def test_tampered_numbers_and_timestamps_are_skipped(sqlite_url):
    """SQLite stores any value in any column: those rows are skipped one by one, too."""
    with TuneDB(sqlite_url) as db:
        for rows in (2, 4, 8, 16):
            _store(db, key=key_for(rows))
    cases = [("median_ms", "fast", 2), ("tuned_at", "yesterday", 4), ("sm_count", "lots", 8)]
    for column, value, rows in cases:
        sql = {"median_ms": "UPDATE ft_v1_winners SET median_ms = :v WHERE bucket = :b",
               "tuned_at": "UPDATE ft_v1_winners SET tuned_at = :v WHERE bucket = :b",
               "sm_count": "UPDATE ft_v1_winners SET sm_count = :v WHERE bucket = :b"}[column]
        _tamper(sqlite_url, sql, v=value, b=key_for(rows).bucket_json())
    with pytest.warns(CacheWarning, match="skipped 2 invalid winner row"):
        with TuneDB(sqlite_url) as db:
            assert [w.key for w in db.winners(DEV)] == [key_for(16)]
    # the sm_count row no longer belongs to DEV; read unfiltered, it is skipped as well
    with pytest.warns(CacheWarning, match="skipped 3 invalid winner row"):
        with TuneDB(sqlite_url) as db:
            assert [w.key for w in db.winners()] == [key_for(16)]


def test_tampered_trial_is_skipped(db_url):
    import json

    with TuneDB(db_url) as db:
        db.record_trial(DEV, FAMILY, KEY, row_config(warps=4), median_ms=1.0)
        db.record_trial(DEV, FAMILY, KEY, row_config(warps=8), median_ms=2.0)
    _tamper(db_url, "UPDATE ft_v1_trials SET config = :bad WHERE config = :good",
            bad=json.dumps(row_config(block="64; import os")),
            good=json.dumps(row_config(warps=8), sort_keys=True, separators=(",", ":")))
    with pytest.warns(CacheWarning, match="skipped 1 invalid trial row"):
        with TuneDB(db_url) as db:
            assert [t.config["num_warps"] for t in db.trials(DEV, FAMILY, KEY)] == [4]


# -- the advice names where the database was named --------------------------------------------

@pytest.mark.parametrize("damage", ["corrupt", "no folder", "foreign layout"])
@pytest.mark.parametrize("read_only", [False, True])
def test_advice_names_db_when_the_database_was_given(tmp_path, monkeypatch, damage, read_only):
    """Given --db (a URL argument), the advice said "Set FLASHTUNE_DB to another database",
    which does nothing: --db overrides FLASHTUNE_DB."""
    if damage == "corrupt":
        path = tmp_path / "tuned.sqlite"
        path.write_bytes(random.Random(1234).randbytes(8192))
    elif damage == "no folder":
        if read_only:
            pytest.skip("a reader opens no missing file (its own message: run flashtune tune)")
        (tmp_path / "a_file").write_text("not a folder")
        path = tmp_path / "a_file" / "sub" / "tuned.sqlite"
    else:
        path = tmp_path / "tuned.sqlite"
        with sqlite3.connect(path) as conn:
            conn.execute("CREATE TABLE ft_v1_winners (op VARCHAR(64), config TEXT)")
    monkeypatch.setenv("FLASHTUNE_DB", str(path))
    with pytest.raises(CacheError) as from_env:
        TuneDB(read_only=read_only)
    assert "FLASHTUNE_DB" in str(from_env.value)
    monkeypatch.delenv("FLASHTUNE_DB")
    with pytest.raises(CacheError) as given:
        TuneDB(str(path), read_only=read_only)
    assert "--db" in str(given.value) and "FLASHTUNE_DB" not in str(given.value)


def test_show_with_a_corrupt_db_names_the_db_option(tmp_path, capsys):
    from cli_helpers import run_cli

    path = tmp_path / "tuned.sqlite"
    path.write_bytes(random.Random(1234).randbytes(8192))
    rc, _, err = run_cli(capsys, "show", "--db", str(path))
    assert rc == 2 and "not a readable SQLite database" in err
    assert "--db" in err and "FLASHTUNE_DB" not in err


def test_postgres_lock_and_statement_waits_are_bounded():
    """libpq waits forever for a lock another session holds (an admin's VACUUM FULL or ALTER
    TABLE on our table): a model's first call would hang there, where the runtime should fall
    back after its timeout. Only connect_timeout was set. (The server's side:
    test_runtime_read_gives_up_on_a_locked_postgres_table.)"""
    from sqlalchemy.engine import make_url

    from flashtune.cache.engine import libpq_connect_args

    url = make_url("postgresql+psycopg2://team@db.example/flashtune")
    assert libpq_connect_args(url, 2.0) == {
        "connect_timeout": 2, "options": "-c lock_timeout=2000 -c statement_timeout=4000"}
    # options the URL gives come last (they win), and are not dropped by ours
    given = make_url("postgresql+psycopg://team@db.example/flashtune"
                     "?options=-c%20statement_timeout%3D9000")
    assert libpq_connect_args(given, 30.0)["options"] == (
        "-c lock_timeout=30000 -c statement_timeout=60000 -c statement_timeout=9000")
    assert libpq_connect_args(make_url("postgresql+pg8000://team@db.example/f"), 2.0) == {}


@pytest.mark.skipif(not PG_URL, reason=_NO_PG)
def test_runtime_read_gives_up_on_a_locked_postgres_table(db_url):
    """A session holding an ACCESS EXCLUSIVE lock on the winners table (VACUUM FULL, ALTER
    TABLE) hung the runtime's read, and the model's first call with it, for as long as the
    lock was held."""
    import threading
    import time

    from sqlalchemy.engine import make_url

    from flashtune.cache.models import WinnerRow
    from flashtune.cache.runtime import RUNTIME_TIMEOUT_S

    if not db_url.startswith("postgresql"):
        pytest.skip("a PostgreSQL lock")
    import psycopg2

    with TuneDB(db_url) as db:
        _store(db)
    url = make_url(db_url)
    holder = psycopg2.connect(host=url.host, port=url.port, user=url.username,
                              password=url.password, dbname=url.database,
                              options=url.query["options"])
    try:
        holder.cursor().execute(f"LOCK TABLE {WinnerRow.__tablename__} IN ACCESS EXCLUSIVE MODE")
        # Without a bound the reads would wait for good: let go after 30 s (a failure, not a
        # hung test run).
        release = threading.Timer(30.0, holder.rollback)
        release.start()
        t0 = time.monotonic()
        winners, said = _runtime_twice(db_url)
        waited = time.monotonic() - t0
    finally:
        release.cancel()
        holder.rollback()
        holder.close()
    assert waited < 2 * RUNTIME_TIMEOUT_S + 10, f"two reads waited {waited:.1f} s"
    assert winners == [] and len(said) == 1 and "default kernels" in said[0], said
    assert "locked" in said[0] and "lock timeout" in said[0], said


# -- control characters in the database's name --------------------------------------------------

@pytest.mark.parametrize("trouble", ["missing", "corrupt", "a folder"])
def test_runtime_notice_spells_out_control_characters_of_the_database_name(tmp_path, trouble):
    """Defect: a FLASHTUNE_DB (or url) holding an escape sequence or a newline was printed raw
    in the runtime's warning, so the notice could recolour or rewrite the user's terminal, or
    read as two notices; `flashtune show` already spelled such characters out."""
    path = tmp_path / "odd\x1b[31m\nname.sqlite"
    if trouble == "corrupt":
        path.write_bytes(random.Random(7).randbytes(8192))
    elif trouble == "a folder":
        path.mkdir()
    winners, said = _runtime_twice(f"sqlite:///{path}")
    assert winners == [] and len(said) == 1, said
    assert "\x1b" not in said[0] and "\n" not in said[0], said
    if trouble != "corrupt":  # (that notice names a long URL by its start only)
        assert "odd\\x1b[31m\\nname" in said[0], said


@pytest.mark.parametrize("trouble", ["missing", "a folder", "a link loop"])
def test_cli_spells_out_control_characters_of_the_database_name(tmp_path, capsys, trouble):
    """Defect: `show` and `clear` printed "no winner database at PATH" raw, and every command's
    error line carried a link loop's (or another CacheError's) path raw: an escape sequence
    recoloured the terminal and a newline split the line."""
    from cli_helpers import run_cli

    path = tmp_path / "odd\x1b[31m\nname.sqlite"
    if trouble == "a folder":
        path.mkdir()
    elif trouble == "a link loop":
        path.symlink_to(path)
    for command in (["show"], ["clear", "--yes"], ["export", str(tmp_path / "out.json")]):
        _, out, err = run_cli(capsys, *command, "--db", str(path))
        assert "odd\\x1b[31m\\nname" in out + err, (command, out, err)
        assert "\x1b" not in out + err and len((out + err).strip().splitlines()) == 1, (command, out, err)


@pytest.mark.parametrize("how", ["deleted", "replaced"])
def test_a_database_file_deleted_or_replaced_while_open_is_not_written_to(tmp_path, how):
    # Defect: a tuner keeps its SQLite connection open, so after `rm tuned.sqlite` (or a
    # backup moved over it) during a `flashtune tune`, every later winner went to the unlinked
    # old file: the run ended "4 winner(s) stored in sqlite:///.../tuned.sqlite" and no file
    # (or the backup's rows only) was there. The write now fails, naming the file.
    path = tmp_path / "tuned.sqlite"
    with TuneDB(str(path)) as db:
        _store(db, median=2.0)
        for side in (path, path.with_name(path.name + "-wal"), path.with_name(path.name + "-shm")):
            side.unlink(missing_ok=True)
        if how == "replaced":
            with TuneDB(str(tmp_path / "other.sqlite")) as other:
                _store(other, median=3.0)
            (tmp_path / "other.sqlite").rename(path)
        with pytest.raises(CacheError, match="deleted or replaced") as caught:
            _store(db, median=1.0)
        assert str(path) in str(caught.value)
        with pytest.raises(CacheError, match="deleted or replaced"):
            db.record_trial(DEV, FAMILY, KEY, row_config(), median_ms=1.0)


def test_a_stored_config_naming_a_key_twice_is_skipped(sqlite_url):
    # Defect: a row whose config JSON names a tunable twice (edited outside flashtune) was
    # served with the last value without a word, where `flashtune import` refuses such an
    # object (other readers keep the first value): which config was meant is unknown.
    with TuneDB(sqlite_url) as db:
        _store(db, row_config(warps=4))
    text4 = '{"num_warps": 4, ' + json.dumps(row_config(warps=2))[1:]
    _tamper(sqlite_url, "UPDATE ft_v1_winners SET config = :config", config=text4)
    winners, said = _runtime_twice(sqlite_url)
    assert winners == [] and len(said) == 1 and "twice" in said[0], said


@pytest.mark.parametrize("url", ["sqlite://", "sqlite:///:memory:"])
def test_an_in_memory_database_is_said_to_hold_no_winners(url, monkeypatch):
    # Defect: FLASHTUNE_DB=sqlite:// (an in-memory database: each connection gets a new, empty
    # one) gave the default kernels without a word, where tune and import refuse such a URL:
    # a user who set it expecting tuned kernels never learnt why none were used.
    from flashtune import once

    monkeypatch.setenv("FLASHTUNE_DB", url)
    for given in (url, None):  # as an argument, and as FLASHTUNE_DB
        monkeypatch.setattr(once, "_said", {})  # each way says it once
        winners, said = _runtime_twice(given)
        assert winners == [] and len(said) == 1 and "in-memory" in said[0], said
        assert "default kernels" in said[0], said
