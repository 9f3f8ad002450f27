"""Checking (and on the tuning path creating) this schema version's tables.

Tables of other schema versions are never read or changed; their presence is reported once.
A table with this version's name but another layout is an error: it was not written by us.
"""

from __future__ import annotations

from sqlalchemy import inspect, types
from sqlalchemy.engine import Connection
from sqlalchemy.schema import CreateTable

from .models import SCHEMA_VERSION, TABLES, VERSIONED_TABLE, WinnerRow


class SchemaProblem(Exception):
    """This version's tables are missing (reading) or laid out differently."""


def is_empty_database(conn: Connection) -> bool:
    """No tables or views at all: SQLite's empty database (a 0-byte file, one a tuner has just
    created). It holds no winners yet, and nothing of another program's to refuse."""
    found = inspect(conn)
    return not found.get_table_names() and not found.get_view_names()


def other_versions(table_names: list[str]) -> dict[int, list[str]]:
    found: dict[int, list[str]] = {}
    for name in sorted(table_names):
        match = VERSIONED_TABLE.match(name)
        if match and int(match.group(1)) != SCHEMA_VERSION:
            found.setdefault(int(match.group(1)), []).append(name)
    return found


def other_versions_note(found: dict[int, list[str]]) -> str:
    versions = ", ".join(f"v{v} ({', '.join(names)})" for v, names in sorted(found.items()))
    return (f"it also holds tables of flashtune schema {versions}; this flashtune uses schema "
            f"v{SCHEMA_VERSION} and leaves them alone (winners there are not used: re-tune)")


# What a column of ours holds, and the reflected column types that keep it: a number stored
# in a text column (SQLite converts it, keeping 15 digits) comes back as a str, which every
# reader then skips as an invalid row, while the writer had reported it stored.
_KINDS = (("integer", types.Integer), ("number", (types.Float, types.Numeric)),
          ("text", types.String), ("date-time", types.DateTime))


def _kind(column_type) -> str:
    for name, base in _KINDS:
        if isinstance(column_type, base):
            return name
    return type(column_type).__name__  # NullType: a type name this database does not know


def _mistyped(table, columns: list[dict]) -> list[str]:
    found = {col["name"]: col["type"] for col in columns}
    return [f"{col.name} is {_kind(found[col.name])}, not {_kind(col.type)}"
            for col in table.columns if _kind(found[col.name]) != _kind(col.type)]


def _columns(inspector, name: str) -> list[dict]:
    try:
        return inspector.get_columns(name)
    except TypeError as err:
        # Column type text that is not UTF-8 reaches SQLAlchemy's type parser as bytes
        # (engine._text_or_bytes): "cannot use a string pattern on a bytes-like object".
        raise SchemaProblem(f"table {name}'s column types cannot be read (text that is not "
                            f"UTF-8: a corrupt file, or not written by flashtune)") from err


def check_layout(conn: Connection, present: set[str]) -> None:
    inspector = inspect(conn)
    for table in TABLES:
        if table.name not in present:
            continue
        columns = _columns(inspector, table.name)
        have = {col["name"] for col in columns}
        want = {col.name for col in table.columns}
        pk = inspector.get_pk_constraint(table.name).get("constrained_columns") or []
        want_pk = [col.name for col in table.primary_key]
        if have != want or sorted(pk) != sorted(want_pk):
            missing, extra = sorted(want - have), sorted(have - want)
            raise SchemaProblem(
                f"table {table.name} does not have the schema v{SCHEMA_VERSION} layout "
                f"(missing columns {missing}, unexpected columns {extra}, primary key {pk}); "
                "it was not written by this flashtune version"
            )
        mistyped = _mistyped(table, columns)
        if mistyped:
            raise SchemaProblem(
                f"table {table.name} does not have the schema v{SCHEMA_VERSION} layout "
                f"({'; '.join(mistyped)}); it was not written by this flashtune version"
            )


def prepare(conn: Connection, *, create: bool) -> dict[int, list[str]]:
    """Check this version's tables (creating missing ones if ``create``); return the tables of
    other schema versions found. Raises SchemaProblem."""
    names = inspect(conn).get_table_names()
    present = {t.name for t in TABLES} & set(names)
    check_layout(conn, present)
    missing = [t for t in TABLES if t.name not in present]
    if not create:  # a reader needs the winners table only
        if WinnerRow.__tablename__ in present:
            return other_versions(names)
        others = other_versions(names)
        raise SchemaProblem(f"it holds no flashtune schema v{SCHEMA_VERSION} winners table "
                            "(nothing was tuned into it by this flashtune version)"
                            + (f"; {other_versions_note(others)}" if others else ""))
    # CREATE TABLE IF NOT EXISTS passes over a view of the name: writes would fail later
    views = sorted({t.name for t in missing} & set(inspect(conn).get_view_names()))
    if views:
        raise SchemaProblem(f"{', '.join(views)} is a view, not a table; it was not made by "
                            "flashtune, which cannot store winners or trials in it")
    for table in missing:
        conn.execute(CreateTable(table, if_not_exists=True))
    return other_versions(names)
