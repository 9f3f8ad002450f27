"""``TuneDB``: the tuner's read/write access to winners and trials.

Every write is one short upsert in its own transaction. Every failure of the database itself
(missing folder, not a database, locked, foreign layout) is raised as CacheError.
"""

from __future__ import annotations

import os
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Callable, Iterator

from sqlalchemy import Table, and_, delete, func, inspect, or_, select, type_coerce
from sqlalchemy import String
from sqlalchemy.engine import Connection

from .engine import (CACHE_FAILURES, blocked_journal, check_writable, display, explain,
                     foreign_tables, lock_schema, make_engine, no_file_there, other_database,
                     reading, resolve_url, sqlite_file, why_unseen, writable_place, writing)
from ..regular_file import create_new
from .errors import CacheError, CacheWarning
from .keys import DeviceInfo, ProblemKey
from .models import KEY_COLUMNS, TrialRow, WinnerRow
from .records import (MAX_QUOTED_REASON, Trial, Winner, check_family_hash, check_ms,
                      check_timing, check_trials, clip, config_json, describe_row, now_utc,
                      op_winner_from_row, trial_from_row, winner_from_row)
from .schema import SchemaProblem, is_empty_database, other_versions_note, prepare
from ..once import warn_at_user
from .warn import warn_once

WINNERS: Table = WinnerRow.__table__
TRIALS: Table = TrialRow.__table__
MAX_ERROR_CHARS = 4000  # a compiler traceback is kept, a runaway one is cut
# upsert_winner's if_stored left out: replace applies whatever row is stored.
ANY_STORED = object()


def create_shareable(path: Path) -> None:
    """Create a new SQLite file (a winner database, a tuner's journal) with the mode a plain
    open gives (0o666 less the umask).

    SQLite would create it 0o644 whatever the umask, and its -wal and -shm files take the
    database file's mode: a team sharing a database under umask 002 could not tune into it.
    An empty file is an empty SQLite database. Another tuner's file, or a link someone put
    there, is left alone (create_new's O_EXCL); any error is left for SQLite to report when it
    opens the path."""
    try:
        os.close(create_new(path))
    except OSError:
        pass


class TuneDB:
    """Winners and trials in one database (default: an SQLite file in the cache folder)."""

    def __init__(self, url: Any = None, *, timeout: float = 30.0, read_only: bool = False):
        """``read_only``: for commands that only look (show, export): creates nothing, never
        changes an SQLite file, waits for no writer's lock, and reads read-only storage. An
        SQLite URL with ``?mode=ro`` needs it: a writer refuses such a URL (CacheError)."""
        if type(timeout) not in (int, float) or not timeout > 0:
            raise ValueError(f"timeout must be a number of seconds > 0, got {timeout!r}")
        self._url = resolve_url(url)
        self._given = url is not None  # else $FLASHTUNE_DB's or the default: advice names which
        if not read_only:
            check_writable(self._url, from_env=url is None)
        self._where = display(self._url)
        self._timeout = float(timeout)
        self._read_only = bool(read_only)
        self._no_trials = False
        self._empty = False
        # the SQLite file written, and its identity (see _check_writable)
        self._file_id: tuple[int, int] | None = None
        self._path: Path | None = None
        path = sqlite_file(self._url)
        # A link loop or a folder on the path this user may not search is no missing database:
        # a reader is not told "run `flashtune tune` first", a writer does not try to create
        # one there (SQLite then blamed a "missing or not writable" folder).
        unseen = why_unseen(path) if path is not None else None
        if unseen is not None:
            raise CacheError(f"winner database {path} {unseen}; {other_database(self._given)}")
        if path is not None and read_only:
            why = no_file_there(path)
            if why == "missing":
                raise CacheError(f"no winner database at {path} (run `flashtune tune` first)")
            if why is not None:
                raise CacheError(f"{path} is {why}, not a winner database file; give the path "
                                 "of a file (--db, or FLASHTUNE_DB)")
        journal = blocked_journal(path) if path is not None else None
        if journal is not None:  # SQLite would wait on a pipe there forever (see blocked_journal)
            raise CacheError(f"cannot open {path}: {journal}, where SQLite keeps its rollback "
                             f"journal, is {no_file_there(journal)}; move it away, or "
                             f"{other_database(self._given)}")
        if not read_only and path is None and self._url.get_backend_name() == "sqlite":
            raise CacheError(f"{display(self._url)} is an in-memory SQLite database: it is gone "
                             "when the process ends, and the tuned winners with it. Give a file "
                             "path (--db, or FLASHTUNE_DB).")
        if path is not None and not read_only:
            # SQLite opens a folder or a pipe there and says "unable to open database file"
            # (read as a missing or unwritable folder) or "disk I/O error".
            why = no_file_there(path)
            if why not in (None, "missing"):
                raise CacheError(f"{path} is {why}, not a winner database file; give the path "
                                 "of a file (--db, or FLASHTUNE_DB)")
            others = foreign_tables(path)
            if others:
                raise CacheError(f"{path} is another program's SQLite database (tables "
                                 f"{', '.join(others[:5])}{', ...' if len(others) > 5 else ''}; "
                                 "no flashtune tables): flashtune does not write into it. Give "
                                 "another file.")
            try:
                path.parent.mkdir(parents=True, exist_ok=True)
            except OSError as err:
                raise CacheError(f"cannot create the folder of the winner database {path}: "
                                 f"{err.strerror or err}. {writable_place(self._given)}.") from None
            if why == "missing":
                create_shareable(path)
        self._engine = make_engine(self._url, self._timeout, read_only=self._read_only)
        try:
            if read_only:
                with self._guard("opening"), reading(self._engine) as conn:
                    self._empty = is_empty_database(conn)
                    others = {} if self._empty else prepare(conn, create=False)
                    # a reader needs only the winners table; trials may be absent (none then)
                    self._no_trials = TRIALS.name not in inspect(conn).get_table_names()
            else:
                with self._guard("opening"), writing(self._engine) as conn:
                    lock_schema(conn)
                    others = prepare(conn, create=True)
        except SchemaProblem as err:
            self._engine.dispose()
            raise CacheError(f"{self._where}: {err}. "
                             f"{other_database(self._given, sentence=True)}.") from None
        except CacheError:
            self._engine.dispose()
            raise
        if others:
            warn_once(self._where, "other-schema", f"{self._where}: {other_versions_note(others)}")
        if path is not None and not read_only:
            # absolute, as SQLAlchemy opens it: a later chdir changes neither
            self._path = path.absolute()
            self._file_id = _file_id(self._path)

    @property
    def url(self) -> str:
        """The database URL as given (may hold a password; messages show `where`)."""
        return self._url.render_as_string(hide_password=False)

    @property
    def empty(self) -> bool:
        """Opened read-only, the database has no tables at all (no winners, no trials)."""
        return self._empty

    @property
    def where(self) -> str:
        """The database URL with its password hidden: what messages show."""
        return self._where

    def __repr__(self) -> str:
        return f"TuneDB({self._where!r})"

    def __enter__(self) -> "TuneDB":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self._engine.dispose()

    # -- writes ------------------------------------------------------------------------------

    def record_trial(self, device: DeviceInfo, family_hash: str, key: ProblemKey, config: Any, *,
                     median_ms: float | None = None, p20_ms: float | None = None,
                     p80_ms: float | None = None, error: str | None = None) -> None:
        """Store one measurement (error=None: status "ok" and median_ms required; else "failed").
        A config measured again replaces its earlier measurement."""
        self._check_writable()
        values = _key_values(device, family_hash, key)
        values["config"] = config_json(key.op, config)
        if error is None:
            if p20_ms is None or p80_ms is None:
                median = check_ms("median_ms", median_ms)
                p20 = check_ms("p20_ms", p20_ms, optional=True)
                p80 = check_ms("p80_ms", p80_ms, optional=True)
            else:
                median, p20, p80 = check_timing(median_ms, p20_ms, p80_ms)
            status = "ok"
        else:
            if type(error) is not str:
                raise TypeError(f"error must be a str or None, got {type(error).__name__}")
            median = check_ms("median_ms", median_ms, optional=True)
            p20 = check_ms("p20_ms", p20_ms, optional=True)
            p80 = check_ms("p80_ms", p80_ms, optional=True)
            status, error = "failed", error[:MAX_ERROR_CHARS]
        values.update(status=status, median_ms=median, p20_ms=p20, p80_ms=p80, error=error,
                      measured_at=now_utc())
        insert = _insert(self._engine.dialect.name, TRIALS).values(values)
        statement = insert.on_conflict_do_update(
            index_elements=[c.name for c in TRIALS.primary_key],
            set_={name: insert.excluded[name] for name in _non_key(TRIALS)},
        )
        with self._guard("recording a trial"), writing(self._engine) as conn:
            conn.execute(statement)

    def upsert_winner(self, device: DeviceInfo, family_hash: str, key: ProblemKey, config: Any, *,
                      median_ms: float, p20_ms: float, p80_ms: float, trials: int,
                      replace: bool = False, if_stored: Any = ANY_STORED) -> bool:
        """Store a winner unless the stored one is faster; True if this one is stored now.

        Equal medians: the smaller canonical config JSON wins, whatever the insertion order.
        ``replace``: store it whatever the stored one's median (the tuner, which measured the
        stored config itself on the shape it tuned: the stored median may come from another
        shape of the bucket). ``if_stored`` (with ``replace``): the config of the winner the
        caller read before measuring, None if there was none; replace applies only while the
        stored row still holds it. A row another writer stored meanwhile (a second tuner on
        the same bucket), which the caller never measured, is kept unless this one is faster.
        """
        from .. import __version__

        self._check_writable()
        if type(replace) is not bool:
            raise TypeError(f"replace must be True or False, got {replace!r}")
        values = _key_values(device, family_hash, key)
        if if_stored is ANY_STORED or if_stored is None:
            seen = if_stored
        else:
            seen = config_json(key.op, if_stored)
        median, p20, p80 = check_timing(median_ms, p20_ms, p80_ms)
        values.update(config=config_json(key.op, config), median_ms=median, p20_ms=p20,
                      p80_ms=p80, trials=check_trials(trials), flashtune_version=__version__,
                      tuned_at=now_utc())
        with self._guard("storing a winner"), writing(self._engine) as conn:
            return self._upsert_winner(conn, values, replace, seen)

    def _upsert_winner(self, conn: Connection, values: dict[str, Any],
                       replace: bool = False, seen: Any = ANY_STORED) -> bool:
        # A stored row no reader can use (edited outside flashtune: a config outside the space,
        # a bad timestamp) goes whatever its median: the faster-wins rule below would keep it,
        # and no re-tune or import could ever give its problem a usable winner again.
        key = _match(WINNERS, {name: values[name] for name in KEY_COLUMNS})
        stored = conn.execute(select_rows(WINNERS).where(*key)).all()
        if stored and convert_rows(stored, winner_from_row)[1]:
            conn.execute(delete(WINNERS).where(*key))
        insert = _insert(conn.dialect.name, WINNERS).values(values)
        new, old = insert.excluded, WINNERS.c
        better = or_(new.median_ms < old.median_ms,
                     and_(new.median_ms == old.median_ms, new.config < old.config))
        if not replace:
            where = better
        elif seen is ANY_STORED:
            where = None
        elif seen is None:  # none was stored: a row there now is another writer's
            where = better
        else:  # checked in the same statement as the write: no other writer in between
            where = or_(better, old.config == seen)
        statement = insert.on_conflict_do_update(
            index_elements=list(KEY_COLUMNS),
            set_={name: new[name] for name in _non_key(WINNERS)},
            where=where,
        )
        # rowcount: 1 when inserted or replaced, 0 when the stored winner stayed
        return conn.execute(statement).rowcount == 1

    def clear(self, device: DeviceInfo | None = None) -> int:
        """Delete winners and trials (of one device, or all); return the winners deleted."""
        self._check_writable()
        with self._guard("clearing"), writing(self._engine) as conn:
            conn.execute(delete(TRIALS).where(*device_filter(TRIALS, device)))
            return conn.execute(delete(WINNERS).where(*device_filter(WINNERS, device))).rowcount

    # -- reads -------------------------------------------------------------------------------

    def winner(self, device: DeviceInfo, family_hash: str, key: ProblemKey) -> Winner | None:
        found = self._read(WINNERS, _match(WINNERS, _key_values(device, family_hash, key)),
                           winner_from_row, "winner")
        return found[0] if found else None

    def winners(self, device: DeviceInfo | None = None, *, op_keys: bool = False) -> list[Winner]:
        """All valid winners (of one device); invalid rows are skipped with one warning.
        ``op_keys``: a row whose bucket no problem of its op can have is invalid too."""
        convert = op_winner_from_row if op_keys else winner_from_row
        return self._read(WINNERS, device_filter(WINNERS, device), convert, "winner")

    def trials(self, device: DeviceInfo, family_hash: str, key: ProblemKey) -> list[Trial]:
        if self._no_trials:
            return []
        return self._read(TRIALS, _match(TRIALS, _key_values(device, family_hash, key)),
                          trial_from_row, "trial")

    def _read(self, table: Table, where: list, convert: Callable, what: str) -> list:
        if self._empty:
            return []
        with self._guard(f"reading {what}s"), reading(self._engine) as conn:
            rows = conn.execute(select_rows(table).where(*where).order_by(*table.primary_key)).all()
        failed: list = []
        good, bad = convert_rows(rows, convert, failed)
        if bad:
            why = ("tuned on other templates, by another flashtune version whose tunables "
                   "differ" if _all_stale(failed) else "edited outside flashtune?")
            message = (f"{self._where}: skipped {len(bad)} invalid {what} row(s) ({why}): "
                       + "; ".join(bad[:5]))
            warn_at_user(message, CacheWarning)
        return good

    def count_winners(self, device: DeviceInfo | None = None) -> int:
        """How many winner rows there are (of one device), valid or not: what clear() deletes."""
        where = device_filter(WINNERS, device)
        if self._empty:
            return 0
        with self._guard("counting winners"), reading(self._engine) as conn:
            return conn.execute(select(func.count()).select_from(WINNERS).where(*where)).scalar_one()

    # -- JSON transfer -----------------------------------------------------------------------

    def export_json(self, path: Any, device: DeviceInfo | None = None) -> int:
        from .transfer import export_winners, exportable_winner_from_row

        # The export replaces its target: aimed at this SQLite file (a typo away, e.g.
        # `flashtune export tuned.sqlite`), it would destroy every tuned winner.
        database = sqlite_file(self._url)
        if database is not None and _same_file(path, database):
            raise ValueError(f"{path}: is the winner database itself; give another file to "
                             "export to")
        # Only rows that import again: one bad row would make the whole file refused.
        winners = self._read(WINNERS, device_filter(WINNERS, device), exportable_winner_from_row,
                             "winner")
        return export_winners(winners, path)

    def import_json(self, path: Any) -> int:
        """Validate every row of the file, then store them (faster-wins rule); return how many
        problems got the file's winner (rows of one problem count once). A bad row rejects the
        whole file (ValueError naming the row)."""
        from .transfer import fastest_per_problem, load_winners

        self._check_writable()
        rows, _ = fastest_per_problem(load_winners(path))
        with self._guard("importing"), writing(self._engine) as conn:
            return sum(self._upsert_winner(conn, values) for values in rows)

    def _check_writable(self) -> None:
        if self._read_only:
            raise CacheError(f"{self._where} was opened read-only (TuneDB(read_only=True))")
        # The engine keeps its SQLite connection open: after the file was deleted (`rm
        # tuned.sqlite` during a tune) or another moved over it, writes would go on into the
        # old, unlinked file, and the winners stored "in" the path would be lost without a word.
        if self._file_id is not None and _file_id(self._path) != self._file_id:
            raise CacheError(f"the winner database file {self._path} was deleted or replaced "
                             "since flashtune opened it: nothing more is written (it would go "
                             "to the old file, which is gone); run the command again")

    @contextmanager
    def _guard(self, what: str) -> Iterator[None]:
        try:
            yield
        except CacheError:
            raise
        except CACHE_FAILURES as err:
            raise CacheError(f"flashtune winner database: {what} failed: "
                             f"{explain(err, self._url, self._timeout, given=self._given)}") from err


def select_rows(table: Table):
    """All columns; timestamps fetched untyped so one tampered value spoils only its row."""
    stamp = "tuned_at" if "tuned_at" in table.c else "measured_at"
    return select(*(type_coerce(c, String).label(c.name) if c.name == stamp else c
                    for c in table.columns))


def _all_stale(failed_rows: list) -> bool:
    """Whether every row that failed to convert was tuned on other templates than today's for
    its op, or for an op this version lacks: what an upgrade that changes a space leaves. A
    family hash not of the form flashtune writes marks a row edited, not stale."""
    from ..gen.variants import of_another_family

    return bool(failed_rows) and all(
        of_another_family(getattr(row, "op", None), getattr(row, "family_hash", None))
        for row in failed_rows)


def convert_rows(rows: list, convert: Callable, failed: list | None = None) -> tuple[list, list[str]]:
    """(converted rows, a message per row that failed); ``failed`` collects those rows."""
    good, bad = [], []
    for row in rows:
        try:
            good.append(convert(row))
        except (ValueError, TypeError, KeyError) as err:  # ConfigError is a ValueError
            bad.append(f"{describe_row(row)}: {clip(str(err), MAX_QUOTED_REASON)}")
            if failed is not None:
                failed.append(row)
    return good, bad


def _key_values(device: Any, family_hash: Any, key: Any) -> dict[str, Any]:
    if not isinstance(device, DeviceInfo):
        raise TypeError(f"device must be a DeviceInfo, got {type(device).__name__}")
    if not isinstance(key, ProblemKey):
        raise TypeError(f"key must be a ProblemKey, got {type(key).__name__}")
    return {"device_name": device.name, "capability": device.capability,
            "sm_count": device.sm_count, "triton_version": device.triton_version,
            "family_hash": check_family_hash(family_hash), "op": key.op, "dtype": key.dtype,
            "bucket": key.bucket_json()}


def _match(table: Table, values: dict[str, Any]) -> list:
    return [table.c[name] == value for name, value in values.items()]


def device_filter(table: Table, device: DeviceInfo | None) -> list:
    if device is None:
        return []
    if not isinstance(device, DeviceInfo):
        raise TypeError(f"device must be a DeviceInfo or None, got {type(device).__name__}")
    return _match(table, {"device_name": device.name, "capability": device.capability,
                          "sm_count": device.sm_count, "triton_version": device.triton_version})


def _file_id(path: Path) -> tuple[int, int] | None:
    """(device, inode) of the file at path, None if there is none (or it cannot be seen)."""
    try:
        info = os.stat(path)
    except (OSError, ValueError):
        return None
    return info.st_dev, info.st_ino


def _same_file(a: Any, b: Any) -> bool:
    """Whether two paths name one existing file (links included); False if either is missing."""
    try:
        return os.path.samefile(a, b)
    except (OSError, TypeError, ValueError):
        return False


def _insert(dialect: str, table: Table):
    """The dialect's INSERT, which knows ON CONFLICT (imported on use: only one is needed)."""
    if dialect == "postgresql":
        from sqlalchemy.dialects.postgresql import insert
    else:
        from sqlalchemy.dialects.sqlite import insert
    return insert(table)


def _non_key(table: Table) -> list[str]:
    return [c.name for c in table.columns if not c.primary_key]
