"""Opening the database: URL resolution, SQLite connection settings, write transactions and
turning driver errors into messages a user can act on.
"""

from __future__ import annotations

import errno
import functools
import os
import shlex
import stat
import re
import sqlite3
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator
from urllib.parse import unquote

from sqlalchemy import create_engine, event, func, select
from sqlalchemy.engine import URL, Connection, Engine, make_url
from sqlalchemy.exc import ArgumentError, NoSuchModuleError, SQLAlchemyError

from ..paths import expand_home
from .errors import CacheError

DB_ENV = "FLASHTUNE_DB"
DB_FILE = "tuned.sqlite"
SUPPORTED = ("sqlite", "postgresql")
# The PostgreSQL drivers built on libpq, whose every wait flashtune bounds (libpq_connect_args).
LIBPQ_DRIVERS = ("psycopg2", "psycopg")
MAX_CONNECT_S = 10  # a PostgreSQL server silent for this long is down: say so, do not hang
_WRITE = "flashtune_write"  # execution option: this transaction will write
# Key of the PostgreSQL advisory lock that serializes table creation between processes.
_PG_SCHEMA_LOCK = 0x666C_7475  # "fltu"
# "://user:password@" in any text: how messages hide a password that SQLAlchemy could not
# parse out for them (a URL it cannot parse, or an error message quoting one). The user part
# may hold "@" (Azure's user@server) and the password "@", "/" or ":" unencoded, so the match
# runs to the last "@" of the word: when unsure, it hides too much, never too little.
_PASSWORD = re.compile(r"(://[^/:\s]*:)\S*@")
# A database URL's scheme (and driver) and colon: "postgresql+psycopg2:". Without the "//"
# after it (sqlite:/x.sqlite, postgresql+psycopg2:/u:pw@h/db) it is a typo FLASHTUNE_DB is
# refused for, never a file path, and messages and `flashtune env` still quote it.
_DB_SCHEME = r"(?:sqlite|postgres|postgresql|mysql|mariadb|oracle|mssql)(?:\+\w+)?:"
# _PASSWORD after such a scheme missing its "//".
_HALF_URL_PASSWORD = re.compile(rf"(\b{_DB_SCHEME}/?[^/:\s]*:)\S*@", re.IGNORECASE)
# A password given in the query ("...?password=pw": psycopg2 and libpq take it so, and
# sslpassword, the client key's passphrase), which SQLAlchemy's hide_password leaves as it is.
_QUERY_PASSWORD = re.compile(r"([?&]\w*password=)[^&\s]*", re.IGNORECASE)


_HALF_URL = re.compile(_DB_SCHEME, re.IGNORECASE)


def hide_password(text: str) -> str:
    """``text`` with the password of every URL in it replaced by ***, for messages."""
    text = _HALF_URL_PASSWORD.sub(r"\1***@", _PASSWORD.sub(r"\1***@", text))
    return _QUERY_PASSWORD.sub(r"\1***", text)


# A URL shown on its own (FLASHTUNE_DB as set, --journal as given), not inside a message.
# SQLAlchemy and libpq take a password holding unencoded spaces ("user:two words@host",
# "?password=two words"), where _PASSWORD and _QUERY_PASSWORD stop, as they must inside a
# message. Alone, the URL's ends are known: the user part ends at its first ":", the password
# at the last "@" of the whole value, a query password at the next "&". The same after a
# database scheme missing its "//" (postgresql:/u:two words@h/db).
_URL_PASSWORD = re.compile(rf"^(\s*(?:[\w+]+://|{_DB_SCHEME}/?)[^:/]*:).*@",
                           re.DOTALL | re.IGNORECASE)
_URL_QUERY_PASSWORD = re.compile(r"([?&]\w*password=)[^&]*", re.IGNORECASE)


def hide_url_password(url: str) -> str:
    """The URL ``url`` (a whole value, not a message quoting one) with its password replaced
    by ***, whatever characters the password holds."""
    return hide_password(_URL_QUERY_PASSWORD.sub(r"\1***", _URL_PASSWORD.sub(r"\1***@", url)))


def resolve_url(url: str | os.PathLike | URL | None) -> URL:
    """Explicit argument, else $FLASHTUNE_DB, else an SQLite file in the cache folder.

    A value without "://" is taken as the path of an SQLite file.
    """
    if url is None:
        env = os.environ.get(DB_ENV, "").strip()  # set but blank: as if unset
        if not env:
            from ..paths import cache_dir

            return URL.create("sqlite", database=str(cache_dir() / DB_FILE))
        try:
            return _resolve_given(env)
        except ValueError as err:
            # Name where the URL came from: a command given no --db never saw a "url".
            raise ValueError(f"{DB_ENV}: {str(err).removeprefix('url: ')}") from None
    return _resolve_given(url)


def check_not_half_url(text: str, name: str) -> None:
    """ValueError naming ``name`` where ``text``, given as a path or URL, is a database URL's
    scheme and colon without the "//" after it (sqlite:/tmp/x.sqlite, postgresql:u@h/db): a
    typo, which as a path would name a file or folder "sqlite:" nobody looks in. Not quoted:
    a password in it would not be hidden (hide_password looks for "://")."""
    if "://" not in text and _HALF_URL.match(text):
        raise ValueError(f"{name}: {text.split(':', 1)[0]}: ... looks like a database URL "
                         "without the '//' after its scheme; give sqlite:///relative/path.sqlite, "
                         "sqlite:////absolute/path.sqlite, postgresql+psycopg2://USER@HOST/DB "
                         "or a file path (./NAME for a file whose name starts so)")


def _resolve_given(url: str | os.PathLike | URL) -> URL:
    if isinstance(url, str) and not url.strip():
        # Path("") is the current folder: an explicit empty value (--db "") is a mistake
        raise ValueError("url: empty; give an SQLAlchemy URL or an SQLite file path")
    if isinstance(url, str):
        # sqlite:/tmp/x.sqlite (a slash short) was taken as a file path: the tuner made the
        # folders ./sqlite:/tmp and stored its winners there, where no runtime looks.
        check_not_half_url(url, "url")
    if isinstance(url, os.PathLike) or (isinstance(url, str) and "://" not in url):
        return URL.create("sqlite", database=str(expand_home(os.fspath(url), "url")))
    if not isinstance(url, (str, URL)):
        raise TypeError(f"url must be a str, path or sqlalchemy URL, got {type(url).__name__}")
    try:
        parsed = make_url(url)
    except (ArgumentError, ValueError) as err:  # ValueError: e.g. a port that is not a number
        raise ValueError(f"url: not an SQLAlchemy database URL: {hide_password(str(err))}") from None
    if parsed.get_backend_name() not in SUPPORTED:
        raise ValueError(f"url: backend {parsed.get_backend_name()!r} is not supported; "
                         f"flashtune stores winners in {' or '.join(SUPPORTED)}")
    try:  # the dialect class only: its driver module is imported when the engine is made
        dialect = parsed.get_dialect()
    except NoSuchModuleError:
        raise ValueError(f"url: unknown driver {parsed.drivername!r}; use e.g. sqlite:///PATH "
                         "or postgresql+psycopg2://USER@HOST/DB") from None
    if getattr(dialect, "is_async", False):
        raise ValueError(f"url: driver {parsed.drivername!r} is asynchronous; flashtune needs a "
                         "synchronous one (sqlite://, postgresql+psycopg2:// or postgresql+psycopg://)")
    if parsed.get_backend_name() == "postgresql" and parsed.get_driver_name() not in LIBPQ_DRIVERS:
        # Another driver (pg8000, psycopg2cffi) gets none of libpq_connect_args' bounds: a
        # silent server or a lock held on our table would hang a model's first call.
        raise ValueError(f"url: driver {parsed.drivername!r} is not supported; flashtune bounds "
                         "its waits on PostgreSQL through libpq's settings, so it takes "
                         "postgresql+psycopg2:// or postgresql+psycopg://")
    if parsed.get_backend_name() == "sqlite":
        check_sqlite_host(parsed, "url")
        _check_no_dropped_parameters(url, parsed)
        _check_sqlite_query(parsed)
    if parsed.get_backend_name() == "sqlite" and (parsed.database or "").startswith("~"):
        # As for a plain path (and --journal): sqlite:///~/x.sqlite means the home folder, not
        # a folder named "~" made under the current one.
        parsed = parsed.set(database=str(expand_home(parsed.database, "url")))
    return parsed


def check_sqlite_host(url: URL, name: str) -> None:
    """ValueError naming ``name`` for an SQLite URL with a host, user, password or port:
    sqlite://tmp/x.sqlite (one slash short) reads "tmp" as a host. The readers took the file as
    x.sqlite in the current folder ("does not exist") and the writers failed in SQLAlchemy with
    a traceback."""
    if url.host or url.username or url.password or url.port:
        raise ValueError(f"{name}: an SQLite URL has no host, user or port (sqlite://tmp/x.sqlite, "
                         "a slash short, names a host 'tmp'); give sqlite:///relative/path.sqlite, "
                         "sqlite:////absolute/path.sqlite or the file path itself")


def _check_no_dropped_parameters(text: str | URL, parsed: URL) -> None:
    """ValueError for a URL parameter given without a value, which SQLAlchemy drops: with
    ``?mode=`` (a script's ``?mode=$MODE``, MODE unset) a writer opened the database it was
    meant not to touch, and ``sqlite:////tmp/a?b.sqlite`` opened the file /tmp/a."""
    if not isinstance(text, str) or "?" not in text:
        return
    given = [part.split("=", 1)[0] for part in text.split("?", 1)[1].split("&") if part]
    dropped = sorted({unquote(name) for name in given} - set(parsed.query))
    if dropped:
        raise ValueError(f"url: SQLite URL parameter(s) {', '.join(map(repr, dropped))} without "
                         "a value; the only one flashtune takes is mode=ro (a '?' in a URL starts "
                         "its parameters: give a file whose name holds one as a plain path)")


def _check_sqlite_query(url: URL) -> None:
    """The query of an SQLite URL holds nothing but ``mode=ro`` (ValueError otherwise).

    pysqlite ignores what it does not know (SQLAlchemy only warns), flashtune's own read-only
    connections ignore the whole query, and of those pysqlite knows, flashtune overrides
    timeout and isolation_level: a parameter would silently mean nothing, or mean something
    to the writers only."""
    query = dict(url.query)
    if "uri" in query:
        # pysqlite would open "PATH?mode=..." (or "file:PATH") as another file than the one
        # flashtune's own read-only readers open: tuned winners would go where nobody looks
        raise ValueError("url: SQLite URI filenames (uri=...) are not supported; give the "
                         "file itself, e.g. sqlite:////abs/path/tuned.sqlite")
    mode = query.pop("mode", None)
    if query:
        raise ValueError(f"url: SQLite URL parameter(s) {', '.join(map(repr, sorted(query)))} "
                         "not supported; the only one flashtune takes is mode=ro (open the "
                         "database read-only)")
    if mode is None:
        return
    if mode != "ro":  # a tuple when given twice
        raise ValueError(f"url: SQLite mode={mode!r} not supported; the only mode flashtune "
                         "takes is mode=ro (open the database read-only)")
    if url.get_driver_name() != "pysqlite" or url.database in (None, "", ":memory:"):
        raise ValueError("url: mode=ro needs an SQLite file and the default driver, e.g. "
                         "sqlite:////abs/path/tuned.sqlite?mode=ro")


def read_only_url(url: URL) -> bool:
    """Whether the URL opens the database read-only (SQLite's ``?mode=ro``)."""
    return url.get_backend_name() == "sqlite" and url.query.get("mode") == "ro"


def check_writable(url: URL, *, from_env: bool = False) -> None:
    """CacheError when the URL opens the database read-only: a writer (tune, import, clear)
    refuses before it does anything, rather than fail at its first write. ``from_env``: the
    URL is $FLASHTUNE_DB's (no URL was given), which the message then names."""
    if read_only_url(url):
        where = f"{DB_ENV}={display(url)}" if from_env else display(url)
        fix = (f"set {DB_ENV} without ?mode=ro, or name a writable database (--db)" if from_env
               else "give the URL without ?mode=ro")
        raise CacheError(f"{where} is read-only (mode=ro in the URL): flashtune writes "
                         f"nothing to it; to tune, import or clear, {fix}")
    path = sqlite_file(url)
    if path is not None and no_file_there(path) is None and not os.access(path, os.W_OK):
        # A file this user may not write (mode 0444, read-only storage): said now, as for
        # mode=ro, not as "would delete N" by a dry-run clear whose --yes then fails.
        # FLASHTUNE_DB named only where it is set: unset, the URL is the default file in the
        # cache folder, which the advice below names as FLASHTUNE_CACHE_DIR's.
        named = from_env and bool(os.environ.get(DB_ENV, "").strip())
        where = f"{DB_ENV}={path}" if named else str(path)
        advice = writable_place(not from_env)
        raise CacheError(f"{where} is read-only (this user may not write the file, or it is "
                         "on read-only storage): flashtune writes nothing to it; to tune, "
                         f"import or clear, {advice[0].lower() + advice[1:]}")


def display(url: URL) -> str:
    return hide_password(url.render_as_string(hide_password=True))


def sqlite_file(url: URL) -> Path | None:
    """The file of an SQLite URL, None for in-memory databases and other backends."""
    if url.get_backend_name() != "sqlite" or url.database in (None, "", ":memory:"):
        return None
    return Path(url.database)


def no_file_there(path: Any) -> str | None:
    """Why a database path holds no file to read, for messages: "a folder", "not a regular
    file" (a device, a pipe), "missing"; None for a regular file.

    One stat: separate isfile / isdir / exists calls raced with another process creating the
    file (a tuner opening a new database), which then read as "not a regular file"."""
    try:
        mode = os.stat(path).st_mode
    except (OSError, ValueError):  # missing, a dangling link or loop, no permission, a NUL
        return "missing"
    if stat.S_ISREG(mode):
        return None
    return "a folder" if stat.S_ISDIR(mode) else "not a regular file"


def why_unseen(path: Any) -> str | None:
    """For a path no_file_there calls "missing": why it could not be looked at, where that
    is not its absence (for messages): "is a symbolic link loop", "cannot be looked at:
    permission denied ..." (a folder on its path this user may not search), or "cannot exist:
    a part of its path is not a folder (F)". None when it is missing (a dangling link too)."""
    try:
        os.stat(path)
    except OSError as err:
        if err.errno == errno.ELOOP:
            return "is a symbolic link loop"
        if err.errno in (errno.EACCES, errno.EPERM):
            return ("cannot be looked at: permission denied (this user may not search a folder "
                    "on its path)")
        if err.errno == errno.ENOTDIR:
            # A file where a folder should be (FLASHTUNE_CACHE_DIR naming a file, say): no
            # file can ever be made there, so it is not "missing" (run `flashtune tune`).
            return "cannot exist: a part of its path is not a folder" + (
                f" ({part})" if (part := _not_a_folder_on(path)) is not None else "")
    except ValueError:  # a NUL in the path
        pass
    return None


def _not_a_folder_on(path: Any) -> Path | None:
    """The first folder of ``path``'s parents, from the root down, that is something else (a
    file), for messages; None if none is found (the path changed meanwhile)."""
    for part in reversed(Path(path).parents):
        try:
            if not stat.S_ISDIR(os.stat(part).st_mode):
                return part
        except OSError:
            return None
    return None


def blocked_journal(path: Path) -> Path | None:
    """The database's rollback journal path (``-journal``) where something other than a
    regular file sits (a named pipe, a folder), else None; callers refuse such a database
    before connecting. SQLite opens and reads a journal it finds there before its first read
    (to roll back an unfinished write), even for a WAL database and a read-only reader: the
    open of a named pipe waits for a writer forever (a model's first call hung), and a folder
    fails as "disk I/O error"."""
    journal = path.with_name(path.name + "-journal")
    return journal if no_file_there(journal) not in (None, "missing") else None


def make_engine(url: URL, timeout: float, *, read_only: bool = False) -> Engine:
    """An engine whose connections wait up to ``timeout`` seconds for locks / the server.

    ``read_only``: an SQLite file is opened so that nothing is ever written to it (not even
    the journal mode), which also lets a database on read-only storage be read. A URL with
    ``?mode=ro`` is opened so whatever ``read_only`` says.
    """
    read_only = read_only or read_only_url(url)
    try:
        if url.get_backend_name() == "sqlite":
            return _sqlite_engine(url, timeout, read_only)
        return create_engine(url, connect_args=libpq_connect_args(url, timeout),
                             pool_pre_ping=True)
    except (ValueError, TypeError) as err:  # a URL parameter the dialect cannot take
        raise CacheError(f"{display(url)}: a parameter of the URL is invalid ({err})") from None
    except ImportError as err:
        module = getattr(err, "name", None) or str(err)
        raise CacheError(f"{display(url)}: its database driver is not installed (no module "
                         f"{module!r}); install it (PostgreSQL: pip install psycopg2-binary and "
                         "use postgresql+psycopg2://...)") from None


def libpq_connect_args(url: URL, timeout: float) -> dict[str, Any]:
    """Connection arguments that bound every wait of a PostgreSQL database reached through
    libpq (psycopg2, psycopg); {} for other drivers.

    libpq's defaults wait forever: for a silent server (``connect_timeout``), and for a lock
    another session holds (an admin's VACUUM FULL or ALTER TABLE on our table), which would
    hang a model's first call. ``lock_timeout`` and ``statement_timeout`` end such a wait
    after ``timeout`` seconds with an error, and the runtime falls back. Options the URL gives
    (``?options=-c ...``) come after ours, so they win.
    """
    if url.get_driver_name() not in LIBPQ_DRIVERS:
        return {}
    wait_ms = max(1, int(timeout * 1000))
    # The statement's bound is the looser one, so that a wait for a lock says so (its error
    # names the lock timeout) rather than the statement's.
    options = f"-c lock_timeout={wait_ms} -c statement_timeout={2 * wait_ms}"
    given = url.query.get("options")
    if given:
        options += " " + (given if isinstance(given, str) else " ".join(given))
    return {"connect_timeout": max(1, min(int(timeout), MAX_CONNECT_S)), "options": options}


def _sqlite_engine(url: URL, timeout: float, read_only: bool) -> Engine:
    path = sqlite_file(url)
    if read_only and path is not None and url.get_driver_name() == "pysqlite":
        engine = create_engine("sqlite://", creator=lambda: _connect_read_only(path, timeout))
        event.listen(engine, "connect", _sqlite_on_connect_read_only)
    else:
        engine = create_engine(url, connect_args={"timeout": timeout})
        event.listen(engine, "connect", functools.partial(_sqlite_on_connect, timeout=timeout))
    event.listen(engine, "begin", _sqlite_on_begin)
    return engine


def foreign_tables(path: Path) -> list[str]:
    """The tables of an existing SQLite file that holds tables but none of flashtune's (of any
    schema version): another program's database. [] otherwise, and for anything unreadable
    (the writer's own open then says what is wrong). Looked at read-only, before a writer's
    first connection switches the file to WAL."""
    from .models import VERSIONED_TABLE

    try:
        if not path.is_file() or path.stat().st_size == 0:
            return []
        conn = _connect_read_only(path, timeout=1.0)
    except (OSError, sqlite3.Error, UnicodeDecodeError):  # the open that follows says why
        return []
    try:
        names = [row[0] for row in conn.execute(
            "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'")]
    except (sqlite3.Error, UnicodeDecodeError):
        return []
    finally:
        conn.close()
    if any(VERSIONED_TABLE.match(name) for name in names):
        return []
    if {"studies", "trials", "version_info"} <= set(names):
        return []  # Optuna's storage: `tune --journal sqlite:///F --db F` shares one file
    return sorted(names)


# What SQLite says when a WAL database cannot get its -shm file (read-only storage).
_NO_SHM = ("unable to open", "attempt to write a readonly database")


def _connect_read_only(path: Path, timeout: float) -> sqlite3.Connection:
    """A connection that can never change the file (SQLite's mode=ro)."""
    uri = path.absolute().as_uri() + "?mode=ro"  # percent-encoded: any file name is safe
    # sqlite3's timeout is SQLite's busy timeout: wait that long for a writer's lock.
    conn = sqlite3.connect(uri, uri=True, timeout=timeout, check_same_thread=False)
    try:
        conn.execute("SELECT count(*) FROM sqlite_master").fetchall()
        return conn
    except sqlite3.OperationalError as err:
        conn.close()
        # SQLite says "unable to open database file", or, in other versions (3.40 with a WAL
        # file and no -shm), "attempt to write a readonly database".
        if not any(text in str(err) for text in _NO_SHM) or not _nobody_can_write(path):
            raise
    # Read-only storage: a WAL database cannot get its -shm file there. As no one can change
    # the file either, SQLite may read it as immutable (no locks, no -shm). Where someone else
    # could write (a folder shared with a tuning user), immutable reads could see a half-made
    # change, so that case stays an error (the runtime then uses its defaults and warns).
    return sqlite3.connect(uri + "&immutable=1", uri=True, timeout=timeout,
                           check_same_thread=False)


def _nobody_can_write(path: Path) -> bool:
    """No write permission bit for anyone on the file and its folder, or no write access at
    all (a read-only mount)."""
    try:
        modes = (path.stat().st_mode, path.parent.stat().st_mode)
    except OSError:
        return False
    if all(mode & 0o222 == 0 for mode in modes):
        return True
    return _read_only_mount(path.parent)


def _read_only_mount(folder: Path) -> bool:
    statvfs = getattr(os, "statvfs", None)
    if statvfs is None:
        return False
    try:
        return bool(statvfs(folder).f_flag & getattr(os, "ST_RDONLY", 1))
    except OSError:
        return False


def _text_or_bytes(raw: bytes) -> str | bytes:
    """SQLite text as str; text that is not UTF-8 (written behind flashtune's back) comes back
    as bytes, which every column check refuses, so it spoils its row only. sqlite3's default
    raises for the whole query instead."""
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        return raw


def _sqlite_on_connect_read_only(dbapi_connection: Any, _record: Any) -> None:
    dbapi_connection.isolation_level = None  # we emit BEGIN ourselves (_sqlite_on_begin)
    dbapi_connection.text_factory = _text_or_bytes


def _sqlite_on_connect(dbapi_connection: Any, _record: Any, *, timeout: float) -> None:
    # We emit BEGIN ourselves (see _sqlite_on_begin); sqlite3's own handling would not let a
    # writer take the write lock up front.
    dbapi_connection.isolation_level = None
    dbapi_connection.text_factory = _text_or_bytes
    cursor = dbapi_connection.cursor()
    try:
        # WAL: readers never wait for a writer; NORMAL: fsync at checkpoints only, still safe
        # against corruption in WAL mode (a power cut can lose the last few winners, no more).
        _switch_to_wal(cursor, timeout)
        cursor.execute("PRAGMA synchronous=NORMAL")
    finally:
        cursor.close()


def _switch_to_wal(cursor: Any, timeout: float) -> None:
    """PRAGMA journal_mode=WAL, retried: on a new file that another process is switching or
    creating at the same moment, SQLite answers "locked" at once, without its busy timeout
    (two tuners started together on a fresh database)."""
    deadline = time.monotonic() + timeout
    pause = 0.005
    while True:
        try:
            cursor.execute("PRAGMA journal_mode=WAL")
            return
        except sqlite3.OperationalError as err:
            if "locked" not in str(err) or time.monotonic() + pause > deadline:
                raise
        time.sleep(pause)
        pause = min(pause * 2, 0.2)


def _sqlite_on_begin(conn: Connection) -> None:
    # A writing transaction takes the write lock at BEGIN, so the busy timeout applies; a
    # deferred one that upgrades from read to write can fail with "locked" without waiting.
    if conn.get_execution_options().get(_WRITE):
        conn.exec_driver_sql("BEGIN IMMEDIATE")
    else:
        conn.exec_driver_sql("BEGIN")


@contextmanager
def writing(engine: Engine) -> Iterator[Connection]:
    """One short write transaction (committed on success, rolled back on error)."""
    with engine.connect() as conn:
        conn.execution_options(**{_WRITE: True})
        with conn.begin():
            yield conn


@contextmanager
def reading(engine: Engine) -> Iterator[Connection]:
    with engine.connect() as conn:
        with conn.begin():
            yield conn


def lock_schema(conn: Connection) -> None:
    """Serialize table creation between processes (SQLite: BEGIN IMMEDIATE already does)."""
    if conn.dialect.name == "postgresql":
        conn.execute(select(func.pg_advisory_xact_lock(_PG_SCHEMA_LOCK)))


def explain(err: BaseException, url: URL, timeout: float, *, given: bool = False) -> str:
    """A message saying what is wrong with the database and what to do about it. ``given``:
    the URL was an argument (--db), which overrides $FLASHTUNE_DB: the advice names --db."""
    where = display(url)
    orig = getattr(err, "orig", None) or err  # the driver's own message, without SQL echo
    lines = str(orig).strip().splitlines()
    # The driver's text may quote the URL (a host name it could not resolve, say).
    text = hide_password(lines[0]) if lines else type(orig).__name__
    lowered = text.lower()
    if isinstance(orig, UnicodeDecodeError):
        return (f"{where} is not a readable SQLite database (corrupt, or another kind of "
                "file): its schema or SQLite's message about it holds text that is not UTF-8. "
                f"Move it away or {other_database(given)}.")
    if "not a database" in lowered or "malformed" in lowered:
        return (f"{where} is not a readable SQLite database (corrupt, or another kind of "
                f"file): {text}. Move it away or {other_database(given)}.")
    if "locked" in lowered or "busy" in lowered or "lock timeout" in lowered:
        return (f"{where} is locked by another process (waited {timeout:g} s): {text}. "
                "Retry when the other tuning run is done.")
    journal = _hot_journal(orig, url)
    if journal is not None:
        return (f"{where} has a rollback journal, {journal}, left by an unfinished write "
                "(another program's, killed or crashed: flashtune writes in WAL mode); SQLite "
                "must roll it back before the database can be read, and a read-only open may "
                f"not ({text}). Open it once with write access, e.g. `sqlite3 "
                f"{shlex.quote(str(sqlite_file(url)))} 'PRAGMA quick_check'`, as a user who "
                "may write its folder; do not delete the journal (the database would keep the "
                "half-done write).")
    cannot_open = "unable to open database file" in lowered or "readonly" in lowered
    # A named pipe (or device) at the -wal or -shm path fails as "disk I/O error".
    blocker = (_side_file_not_a_file(url) if cannot_open or "disk i/o error" in lowered
               else None)
    if blocker is not None:
        return (f"cannot open {where}: {blocker}, where SQLite keeps a file of the database, "
                f"is {no_file_there(blocker)} ({text}). Move it away (SQLite makes the file "
                f"again), or {other_database(given)}.")
    path = sqlite_file(url)
    if (cannot_open and path is not None and no_file_there(path) is None
            and not os.access(path, os.R_OK)):
        # The file itself, not its folder (which the advice below would blame)
        return (f"cannot read {where}: this user may not read the file (permission denied) "
                f"({text}). Ask its owner for read access, or {other_database(given)}.")
    if cannot_open:
        # Readers too: SQLite reads a WAL database only where it may make the -shm file
        # beside it (unless nobody at all can write there), so a team database in another
        # user's folder fails here for its readers.
        return (f"cannot open or write {where}: its folder is missing or not writable "
                f"({text}). {writable_place(given)} (to use a database in a folder you "
                "cannot write, copy it, or carry its winners with `flashtune export` and "
                "`flashtune import`).")
    return f"{where}: {type(err).__name__}: {text}"


def _side_file_not_a_file(url: URL) -> Path | None:
    """The database's ``-wal`` or ``-shm`` path where something other than a regular file
    (a folder, say) sits, which SQLite cannot open; None if there is none. Its error says only
    "unable to open database file", which read as a folder we may not write."""
    path = sqlite_file(url)
    if path is None:
        return None
    for suffix in ("-wal", "-shm"):
        side = path.with_name(path.name + suffix)
        if no_file_there(side) not in (None, "missing"):
            return side
    return None


def _hot_journal(orig: BaseException, url: URL) -> Path | None:
    """The ``-journal`` file SQLite refused to roll back (a read-only open finding another
    program's unfinished write), else None. That error says only "attempt to write a readonly
    database", which read as a folder we may not write."""
    path = sqlite_file(url)
    if path is None or not isinstance(orig, sqlite3.Error):
        return None
    journal = path.with_name(path.name + "-journal")
    name = getattr(orig, "sqlite_errorname", None)  # Python 3.11+
    if name is not None:
        return journal if name == "SQLITE_READONLY_ROLLBACK" else None
    # Python 3.10 has no error name: the refusal's text, and a journal that is there
    try:
        there = os.stat(journal).st_size > 0
    except OSError:
        return None
    return journal if there and "readonly" in str(orig).lower() else None


def other_database(given: bool, *, sentence: bool = False) -> str:
    """Advice: use another database, where the URL came from (--db overrides $FLASHTUNE_DB,
    so setting that would change nothing). ``sentence``: capitalized, to start one."""
    advice = "give --db another database" if given else f"set {DB_ENV} to another database"
    return advice[0].upper() + advice[1:] if sentence else advice


def writable_place(given: bool) -> str:
    """Advice: a database in a folder that can be written, where the URL came from."""
    return ("Give --db a database in a writable place" if given
            else f"Set {DB_ENV} or FLASHTUNE_CACHE_DIR to a writable place")


# UnicodeDecodeError: sqlite3 decoding an error message or schema text that is not UTF-8
# (a corrupt file, or one written behind flashtune's back), which no other error type covers.
CACHE_FAILURES = (SQLAlchemyError, OSError, UnicodeDecodeError)
