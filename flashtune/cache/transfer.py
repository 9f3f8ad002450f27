"""Winners to and from JSON files, to carry tuning results between machines.

Import trusts nothing: every row must have exactly the expected fields with the expected types,
its dtype and bucket must be a key the op's problems can have (``gen.problem_keys``), and its
config must pass the op's variant space (``gen.validate_config``) and run some problem of its
bucket (``gen.problem_keys.bucket_misfit``). One bad row rejects
the whole file with a message naming the row and the reason.
"""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path
from typing import Any, Iterable

from ..regular_file import create_temp_beside, open_regular_file
from .keys import DeviceInfo, ProblemKey, canonical_json
from .models import KEY_COLUMNS, SCHEMA_VERSION, WinnerRow
from .records import (MAX_QUOTED_KEY, MAX_QUOTED_REASON, DuplicateKey, Winner, check_family_hash,
                      check_fits_bucket, check_key, check_timing, check_trials, clip,
                      op_winner_from_row, unique_keys, utc, validated_config)

FORMAT = "flashtune-winners"
_ROW_FIELDS = {"device", "family_hash", "op", "dtype", "bucket", "config", "median_ms", "p20_ms",
               "p80_ms", "trials", "flashtune_version", "tuned_at"}
_DEVICE_FIELDS = {"name", "capability", "sm_count", "triton_version"}
_MAX_REPORTED = 20
# An export holds one row (~700 bytes) per tuned problem: thousands of rows, a few MiB. A file
# far larger is not one, and validating it row by row would take minutes.
MAX_IMPORT_BYTES = 32 * 2**20


def winner_to_json(w: Winner) -> dict[str, Any]:
    return {
        "device": {"name": w.device.name, "capability": w.device.capability,
                   "sm_count": w.device.sm_count, "triton_version": w.device.triton_version},
        "family_hash": w.family_hash, "op": w.key.op, "dtype": w.key.dtype,
        "bucket": w.key.bucket_dict(), "config": w.config, "median_ms": w.median_ms,
        "p20_ms": w.p20_ms, "p80_ms": w.p80_ms, "trials": w.trials,
        "flashtune_version": w.flashtune_version, "tuned_at": w.tuned_at.isoformat(),
    }


def exportable_winner_from_row(row: Any) -> Winner:
    """op_winner_from_row, and the row must pass import's own checks too: an export holds only
    rows that import again. (A text longer than its column, which SQLite keeps, e.g. a device
    name of 201 characters stored by ``upsert_winner``, made import refuse the whole file.)"""
    winner = op_winner_from_row(row)
    row_values(winner_to_json(winner))
    return winner


def export_winners(winners: Iterable[Winner], path: Any) -> int:
    """Write the winners to ``path`` (atomically: a reader never sees half a file)."""
    rows = [winner_to_json(w) for w in winners]
    document = {"format": FORMAT, "schema_version": SCHEMA_VERSION, "winners": rows}
    if _names_a_folder(path):
        raise OSError(f"{path}: names a folder (it ends with a separator or \".\"); give the "
                      "path of the JSON file to write")
    target = Path(path)
    existing = _mode_if_present(target)  # one look at what the export would replace
    if existing is not None:
        if stat.S_ISLNK(existing):
            # Neither replaced (the file it names would go stale, the link gone) nor followed
            # (a link another user planted in a shared folder would aim the export at any file
            # the caller can write, past the kernel's protected_symlinks rule).
            raise OSError(f"{path}: is a symbolic link; give the path of the file it names")
        if stat.S_ISDIR(existing):
            raise OSError(f"{path}: is a folder; give the path of the JSON file to write")
        if not stat.S_ISREG(existing):  # never replaced: a device node (/dev/stdout) or a pipe
            raise OSError(f"{path}: is not a regular file (a device, pipe or socket); give the "
                          "path of the JSON file to write")
        if _may_be_sqlite_file(target):  # a typo away from the database (tuned.sqlite, another's)
            raise ValueError(f"{path}: is an SQLite database (or a file we may not read to "
                             "check), which the export would replace; give the path of a JSON "
                             "file")
    # Whether or not the side file exists yet: SQLite makes -wal and -shm only while the
    # database is open, and takes a -journal it finds later for a rollback to replay.
    database = _database_of_side_file(target)
    if database is not None:
        raise ValueError(f"{path}: is the {target.name[len(database.name):]} file of the SQLite "
                         f"database {database.name}; replacing it would damage that database; "
                         "give the path of a JSON file")
    try:
        fd, tmp = create_temp_beside(target)
    except OSError as err:
        raise OSError(f"{path}: cannot write there ({err.strerror or err})") from None
    try:
        if existing is not None and hasattr(os, "fchmod"):
            # The file it replaces keeps its permission bits (a group-shared 0664 export stays
            # so); a new one gets the mode a plain open would give it.
            os.fchmod(fd, stat.S_IMODE(existing))
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            json.dump(document, handle, indent=1, sort_keys=True)
            handle.write("\n")
            # On disk before the rename: a rename can reach the disk before the data, and a
            # crash then leaves an empty or partial file where the previous export was.
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, target)
    except BaseException as err:
        Path(tmp).unlink(missing_ok=True)
        if isinstance(err, OSError):  # a full disk, a quota: say which file it was
            raise OSError(f"{path}: cannot write there ({err.strerror or err}); the file "
                          "there, if any, is left as it was") from None
        raise
    return len(rows)


def _names_a_folder(path: Any) -> bool:
    """Whether the path as given ends with a separator, "." or "..": pathlib drops a trailing
    "/" and "/.", which made ``export new/`` a file named "new" and ``export old.json/``
    replace old.json."""
    given = os.fspath(path)
    if isinstance(given, bytes):
        given = os.fsdecode(given)
    separators = tuple(sep for sep in (os.sep, os.altsep) if sep)
    return given.endswith(separators) or os.path.basename(given) in (".", "..")


def _mode_if_present(path: Path) -> int | None:
    """The st_mode of what is at path itself (a link is not followed), or None when nothing is
    there (or nothing we may see: the export then creates the file)."""
    try:
        return os.lstat(path).st_mode
    except OSError:
        return None


def _may_be_sqlite_file(path: Path) -> bool:
    """Whether the regular file at path starts as an SQLite database does, or may (we may not
    read it: another user's database in a shared folder, which replacing needs no read
    permission for). (The caller has seen a regular file there: a device is never opened, it
    can have effects of its own.)"""
    try:
        with open_regular_file(path) as handle:
            return handle.read(16) == b"SQLite format 3\x00"
    except PermissionError:
        return True
    except OSError:
        return False


# The files SQLite keeps beside a database while it is open or in WAL mode: the write-ahead
# log holds committed writes not yet copied into the database, so replacing it loses them.
_SQLITE_SIDE_FILES = ("-wal", "-shm", "-journal")


def _database_of_side_file(path: Path) -> Path | None:
    """The SQLite database (or a file that may be one) whose side file (-wal, -shm, -journal)
    path is, or None. The suffix in any case: on a case-insensitive file system (macOS)
    tuned.sqlite-WAL is the log."""
    for suffix in _SQLITE_SIDE_FILES:
        if path.name.lower().endswith(suffix) and len(path.name) > len(suffix):
            database = path.with_name(path.name[:-len(suffix)])
            mode = _mode_if_present(database)
            if mode is not None and stat.S_ISREG(mode) and _may_be_sqlite_file(database):
                return database
    return None


def load_winners(path: Any) -> list[dict[str, Any]]:
    """The file's rows as database values, every one validated (ValueError otherwise)."""
    from ..gen.variants import of_another_family

    try:
        info = os.stat(path)
    except OSError as err:
        raise OSError(f"{path}: cannot read ({err.strerror or err})") from None
    if not stat.S_ISREG(info.st_mode):  # /dev/zero, a pipe: no size to check, maybe no end
        raise ValueError(f"{path}: not a regular file (a folder, device, pipe or socket); give "
                         "the path of a winners export")
    too_large = ValueError(f"{path}: too large for a winners export (at most "
                           f"{MAX_IMPORT_BYTES // 2**20} MiB)")
    if info.st_size > MAX_IMPORT_BYTES:
        raise too_large
    try:
        with open_regular_file(path) as handle:
            raw = handle.read(MAX_IMPORT_BYTES + 1)  # bounded: the file may grow after stat
    except OSError as err:
        raise OSError(f"{path}: cannot read ({err.strerror or err})") from None
    if len(raw) > MAX_IMPORT_BYTES:
        raise too_large
    try:
        # utf-8-sig: a leading byte order mark (as Windows editors save UTF-8) is dropped
        document = json.loads(raw.decode("utf-8-sig"), object_pairs_hook=unique_keys)
    except UnicodeDecodeError:  # before ValueError, its base class
        raise ValueError(f"{path}: not a JSON file (not UTF-8 text)") from None
    except DuplicateKey as err:  # before ValueError, its base class
        raise ValueError(f"{path}: not a winners export: {err}") from None
    except ValueError as err:  # JSONDecodeError, or an integer past Python's digit limit
        raise ValueError(f"{path}: not a JSON file ({err})") from None
    except RecursionError:
        raise ValueError(f"{path}: not a winners export (JSON nested too deeply)") from None
    if not isinstance(document, dict) or document.get("format") != FORMAT:
        raise ValueError(f"{path}: not a flashtune winners export (expected \"format\": \"{FORMAT}\")")
    version = document.get("schema_version")
    if type(version) is not int:  # true and 1.0 are not 1, nor is "1" a version written
        raise ValueError(f"{path}: \"schema_version\" must be an integer (this flashtune "
                         f"reads version {SCHEMA_VERSION}), got {version!r}")
    if version != SCHEMA_VERSION:
        raise ValueError(f"{path}: written with winners schema version {version}; this "
                         f"flashtune reads version {SCHEMA_VERSION}")
    rows = document.get("winners")
    if not isinstance(rows, list):
        raise ValueError(f"{path}: \"winners\" must be a list")
    values, errors = [], []
    for index, row in enumerate(rows):
        try:
            values.append(row_values(row))
        except (ValueError, TypeError, KeyError) as err:  # ConfigError is a ValueError
            reason = clip(str(err), MAX_QUOTED_REASON)  # it may quote a value of any length
            # e.g. an older flashtune's export: a knob it lacked. A family hash of another
            # form than flashtune writes was edited: not said to be of other templates.
            if of_other_templates(row) and of_another_family(row["op"], row["family_hash"]):
                reason += (" (tuned on other templates, by another flashtune version: the "
                           "dispatcher would not use it; re-tune with this version)")
            label = f"winners[{index}]"
            if isinstance(row, dict):
                label += " (" + " ".join(clip(repr(row.get(name)), MAX_QUOTED_KEY)
                                         for name in ("op", "dtype", "bucket")) + ")"
            errors.append(f"{label}: {reason}")
    if errors:
        more = len(errors) - _MAX_REPORTED
        raise ValueError(f"{path}: rejected, {len(errors)} invalid row(s), nothing imported:\n  "
                         + "\n  ".join(errors[:_MAX_REPORTED])
                         + (f"\n  ... and {more} more" if more > 0 else ""))
    return values


def fastest_per_problem(rows: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], int]:
    """One row per winner key (device, family, problem): the one the database's faster-wins
    rule keeps (the smaller median, then the smaller config JSON; of equal rows the first),
    and how many rows of the file it leaves out. Storing every row would count each as
    imported though only one per key stays."""
    fastest: dict[tuple, dict[str, Any]] = {}
    for values in rows:
        key = tuple(values[name] for name in KEY_COLUMNS)
        kept = fastest.get(key)
        if kept is None or (values["median_ms"], values["config"]) < (kept["median_ms"],
                                                                     kept["config"]):
            fastest[key] = values
    return list(fastest.values()), len(rows) - len(fastest)


def of_other_templates(row: Any) -> bool:
    """A row of a known op whose family hash is not today's (the dispatcher ignores it)."""
    from ..gen import current_family_hash

    if not isinstance(row, dict):
        return False
    current, family = current_family_hash(row.get("op")), row.get("family_hash")
    return current is not None and isinstance(family, str) and family != current


def row_values(row: Any) -> dict[str, Any]:
    """One exported row as database column values; raises on anything off."""
    _exact_fields("row", row, _ROW_FIELDS)
    device = row["device"]
    _exact_fields("device", device, _DEVICE_FIELDS)
    info = DeviceInfo(device["name"], device["capability"], device["sm_count"],
                      device["triton_version"])
    if not isinstance(row["bucket"], dict):
        raise TypeError(f"bucket must be an object, got {type(row['bucket']).__name__}")
    key = ProblemKey.make(row["op"], row["dtype"], row["bucket"])
    check_key(key)
    median, p20, p80 = check_timing(row["median_ms"], row["p20_ms"], row["p80_ms"])
    if type(row["flashtune_version"]) is not str or not row["flashtune_version"]:
        raise TypeError(f"flashtune_version must be a non-empty str, got {row['flashtune_version']!r}")
    if type(row["tuned_at"]) is not str:
        raise TypeError(f"tuned_at must be an ISO 8601 str, got {row['tuned_at']!r}")
    config = validated_config(key.op, row["config"])
    check_fits_bucket(key, config)
    values = {
        "device_name": info.name, "capability": info.capability, "sm_count": info.sm_count,
        "triton_version": info.triton_version, "family_hash": check_family_hash(row["family_hash"]),
        "op": key.op, "dtype": key.dtype, "bucket": key.bucket_json(),
        "config": canonical_json(config), "median_ms": median, "p20_ms": p20,
        "p80_ms": p80, "trials": check_trials(row["trials"]),
        "flashtune_version": row["flashtune_version"], "tuned_at": utc(row["tuned_at"]),
    }
    _check_text_columns(values)
    return values


def _check_text_columns(values: dict[str, Any]) -> None:
    """Every text value storable as it is: UTF-8 encodable (JSON may carry lone surrogates)
    and within its column's length (PostgreSQL refuses longer values; SQLite would keep
    them), so a bad row is named here instead of failing inside the database."""
    for name, value in values.items():
        if not isinstance(value, str):
            continue
        field = _FILE_FIELDS.get(name, name)
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            raise ValueError(f"{field}: not valid Unicode text (a lone surrogate)") from None
        if "\x00" in value:  # PostgreSQL text cannot hold NUL
            raise ValueError(f"{field}: contains a NUL character")
        length = getattr(WinnerRow.__table__.c[name].type, "length", None)
        if length is not None and len(value) > length:
            raise ValueError(f"{field}: {len(value)} characters, at most {length} fit")


# Columns whose field in an export file has another name.
_FILE_FIELDS = {"device_name": "device.name", "capability": "device.capability",
                "triton_version": "device.triton_version"}


def _exact_fields(what: str, value: Any, fields: set[str]) -> None:
    if not isinstance(value, dict):
        raise TypeError(f"{what} must be an object, got {type(value).__name__}")
    unknown, missing = sorted(set(value) - fields), sorted(fields - set(value))
    if unknown or missing:
        raise ValueError(f"{what}: unknown fields {unknown}, missing fields {missing}")
