"""The dispatcher's read of tuned winners: never raises, never creates anything.

Whatever goes wrong (no database yet, a missing folder, a corrupt or locked file, another schema
version, an unreachable server, tampered rows) is said once per process with a CacheWarning,
and the dispatcher falls back to its heuristic defaults.
"""

from __future__ import annotations

import os
from typing import Any, Mapping

from sqlalchemy import and_, false, or_

from .db import device_filter, convert_rows, select_rows
from .engine import (DB_ENV, CACHE_FAILURES, blocked_journal, display, explain, hide_password,
                     hide_url_password, make_engine, no_file_there, reading, resolve_url,
                     sqlite_file, why_unseen)
from .errors import CacheWarning
from .keys import DeviceInfo
from .models import WinnerRow
from .records import Winner, op_winner_from_row
from .schema import SchemaProblem, is_empty_database, other_versions_note, prepare
from .warn import warn_once

# A model should not hang on a busy database: wait briefly, then run untuned.
RUNTIME_TIMEOUT_S = 2.0
_FALLBACK = "flashtune uses its default kernels"


def read_runtime_winners(device: DeviceInfo, url: Any = None, *,
                         families: Mapping[str, str] | None = None) -> list[Winner]:
    """Every valid winner of ``device``; [] with one warning on any trouble.

    ``families`` (op -> today's template family hash): read only winners of those ops and
    families. The rest were tuned on other templates (an older or newer flashtune, which a
    shared database may hold): the dispatcher would ignore them, and their configs may not
    even fit today's spaces, which must not read as damaged rows."""
    try:
        return _read(device, url, families)
    except CacheWarning:
        # _read's own notice, raised because warnings are errors here (python -W error): let
        # it through as it is. The catch-all below would re-say it wrapped ("could not be
        # read (CacheWarning: ...)"), a second notice of one trouble.
        raise
    except Exception as err:  # noqa: BLE001 - the user's model must never fail because of us
        where = _where(url)
        warn_once(where, "error", f"flashtune winner database {where} could not be read "
                                  f"({type(err).__name__}: {hide_password(str(err))}); {_FALLBACK}")
        return []


def _read(device: DeviceInfo, url: Any, families: Mapping[str, str] | None) -> list[Winner]:
    if not isinstance(device, DeviceInfo):
        raise TypeError(f"device must be a DeviceInfo, got {type(device).__name__}")
    resolved = resolve_url(url)
    where = display(resolved)
    path = sqlite_file(resolved)
    if path is None and resolved.get_backend_name() == "sqlite":
        # sqlite:// or sqlite:///:memory: - each connection opens a new, empty database. tune
        # and import refuse such a URL; a reader says why no winner is ever found.
        warn_once(where, "memory", f"flashtune winner database {where} is an in-memory SQLite "
                                   f"database, which holds no winners (set FLASHTUNE_DB to a "
                                   f"file or a server's URL); {_FALLBACK}")
        return []
    why = no_file_there(path) if path is not None else None
    if why is not None:
        # Connecting would create an empty file (and folders): a reader must not.
        what = {"a folder": "is a folder, not a winner database file",
                "not a regular file": "is not a regular file (a device or pipe)",
                "missing": "does not exist"}[why]
        advice = "run `flashtune tune`, or set FLASHTUNE_DB"
        unseen = why_unseen(path) if why == "missing" else None
        if unseen is not None:  # there may well be a database: tuning would not help
            what, advice = unseen, "set FLASHTUNE_DB to a database this user can read"
            if url is None and not os.environ.get(DB_ENV, "").strip():
                # the default database, in the cache folder: that folder is what is wrong
                advice = "set FLASHTUNE_CACHE_DIR to a folder this user can use, or FLASHTUNE_DB"
        warn_once(where, "missing", f"flashtune winner database {path} {what} ({advice}); "
                                    f"{_FALLBACK}")
        return []
    journal = blocked_journal(path) if path is not None else None
    if journal is not None:  # SQLite would wait on a pipe there forever (see blocked_journal)
        warn_once(where, "journal", f"flashtune winner database {path} cannot be read: "
                                    f"{journal}, where SQLite keeps its rollback journal, is "
                                    f"{no_file_there(journal)} (move it away); {_FALLBACK}")
        return []
    # Read-only: never changes the file (not even its journal mode), and works on read-only storage.
    engine = make_engine(resolved, RUNTIME_TIMEOUT_S, read_only=True)
    try:
        table = WinnerRow.__table__
        with reading(engine) as conn:
            if is_empty_database(conn):  # no winners yet, nothing wrong (as `flashtune show`)
                return []
            others = prepare(conn, create=False)
            conditions = device_filter(table, device)
            if families is not None:
                conditions.append(or_(false(), *(and_(table.c.op == op, table.c.family_hash == family)
                                            for op, family in sorted(families.items()))))
            rows = conn.execute(select_rows(table).where(*conditions)
                                .order_by(*table.primary_key)).all()
    except SchemaProblem as err:
        warn_once(where, "schema", f"flashtune winner database {where}: {err}; {_FALLBACK}")
        return []
    except CACHE_FAILURES as err:
        # explain()'s advice ends a sentence; the fallback follows after "; "
        why = explain(err, resolved, RUNTIME_TIMEOUT_S).removesuffix(".")
        warn_once(where, "error", f"flashtune winner database could not be read: {why}; "
                                  f"{_FALLBACK}")
        return []
    finally:
        engine.dispose()
    if others:
        warn_once(where, "other-schema", f"flashtune winner database {where}: "
                                         f"{other_versions_note(others)}")
    good, bad = convert_rows(rows, op_winner_from_row)
    if bad:
        warn_once(where, "invalid-rows", f"flashtune winner database {where}: skipped "
                                         f"{len(bad)} invalid winner row(s): " + "; ".join(bad[:5]))
    return good


def _where(url: Any) -> str:
    try:
        return display(resolve_url(url))
    except Exception:  # noqa: BLE001 - an unparsable URL: name what was given (no password)
        given = url if url is not None else os.environ.get(DB_ENV)
        # The default file, in a cache folder that cannot be named: FLASHTUNE_DB unset, or set
        # but blank (resolve_url reads that as unset too).
        if given is None or (url is None and not given.strip()):
            return "in the cache folder"
        # the URL's password hidden before repr escapes it (a space or tab in it is kept)
        shown = (repr(hide_url_password(given)) if isinstance(given, str)
                 else hide_password(repr(given)))
        return shown if url is not None else f"{DB_ENV}={shown}"
