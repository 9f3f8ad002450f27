"""``flashtune env``: the facts a bug report needs.

GPU (name, compute capability, SMs), versions of Python, torch, triton and flashtune, the
winner database URL (password hidden) and whether it exists, the cache and kernel folders and
the FLASHTUNE_* / TRITON_INTERPRET switches, and any other FLASHTUNE_* variable set (flashtune
reads none: a misspelt switch).
"""

from __future__ import annotations

import argparse
import os
import platform

_SWITCHES = ("FLASHTUNE_DB", "FLASHTUNE_CACHE_DIR", "FLASHTUNE_DISABLE", "FLASHTUNE_LOG",
             "FLASHTUNE_FAST_LAUNCH", "TRITON_INTERPRET")
# The boolean switches and their defaults (flashtune.dispatch.settings.env_flag reads them).
_FLAG_DEFAULTS = {"FLASHTUNE_DISABLE": False, "FLASHTUNE_LOG": False,
                  "FLASHTUNE_FAST_LAUNCH": True}


def _switch_value(name: str) -> str:
    """The switch as set, and whether flashtune ignores it: a bug report must not show
    FLASHTUNE_LOG=maybe as if logging were on."""
    from ..cache.records import printable
    from ..dispatch.settings import bool_word

    raw = os.environ.get(name)
    if raw is None:
        return "(unset)"
    # Escaped here, not only by run()'s print: hide_url_password then reads the URL as it is shown
    # (a tab or newline inside a password would hide it from its pattern).
    shown = printable(raw)
    if name in _FLAG_DEFAULTS and raw.strip() and bool_word(raw) is None:
        default = "on" if _FLAG_DEFAULTS[name] else "off"
        shown += f"  (ignored: expected 1/true/yes/on or 0/false/no/off; {default} by default)"
    return shown


def _unknown_switches() -> list[str]:
    """FLASHTUNE_* variables set here that flashtune never reads: FLASHTUNE_DISABEL=1 (a typo)
    left flashtune on without a word. FLASHTUNE_TEST_* are the test suite's own, FLASHTUNE_PG_*
    .ci/postgres.sh's (the throwaway PostgreSQL server the tests may use)."""
    return sorted(name for name in os.environ
                  if name.startswith("FLASHTUNE_") and name not in _SWITCHES
                  and not name.startswith(("FLASHTUNE_TEST_", "FLASHTUNE_PG_")))


def _unknown_value(name: str) -> str:
    import difflib

    from ..cache.engine import hide_url_password
    from ..cache.records import printable

    close = difflib.get_close_matches(name, _SWITCHES, n=1)
    hint = f"; did you mean {close[0]}?" if close else ""
    # The value's password hidden before the note is added: as a URL's, a query password
    # runs to the next "&", and would take the note with it.
    shown = hide_url_password(printable(os.environ[name]))
    return f"{shown}  (unknown: flashtune reads no such variable{hint})"


def register(sub) -> None:
    p = sub.add_parser("env", help="print GPU, versions, database and cache locations",
                       description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.set_defaults(run=run)


def _version(dist: str) -> str:
    from importlib import metadata

    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return "not installed"


def run(args) -> int:
    import flashtune

    from .. import paths
    from ..cache.engine import hide_url_password, no_file_there, why_unseen
    from ..cache.records import printable
    from ..dispatch.info import current_device_info, database_location

    lines: list[tuple[str, str]] = []
    try:
        info = current_device_info()
        lines.append(("device", f"{info.name} (capability {info.capability}, "
                                f"{info.sm_count} SMs)"))
    except Exception as err:  # noqa: BLE001 - report, do not fail: this is a diagnostics command
        lines.append(("device", f"unknown ({type(err).__name__}: {err})"))
    try:
        import torch

        cuda = torch.version.cuda or "none"
        lines.append(("cuda", f"{cuda} (available: {torch.cuda.is_available()}, "
                              f"devices: {torch.cuda.device_count()})"))
    except Exception as err:  # noqa: BLE001
        lines.append(("cuda", f"unknown ({err})"))
    lines.append(("python", platform.python_version()))
    lines.append(("torch", _version("torch")))
    lines.append(("triton", _version("triton")))
    lines.append(("flashtune", flashtune.__version__))
    try:
        url, path = database_location()
    except (ValueError, TypeError) as err:  # e.g. FLASHTUNE_DB=mysql://...: report it, go on
        url, path = f"invalid ({err})", None
    if path is not None:
        # what show, tune and the runtime find there: a folder or a device is no database
        why = no_file_there(path)
        # a link loop or a folder on the path this user may not search: no missing file
        unseen = why_unseen(path) if why == "missing" else None
        url += "  (exists)" if why is None else f"  ({unseen})" if unseen is not None \
            else "  (not created yet)" if why == "missing" else f"  ({why}, not a database file)"
    lines.append(("database", url))
    try:
        folder, kernels = paths.cache_dir(), paths.kernel_dir()
    except ValueError as err:  # FLASHTUNE_CACHE_DIR with a ~ that cannot be expanded
        lines.append(("cache folder", f"invalid ({err})"))
    else:
        lines.append(("cache folder", str(folder)))
        lines.append(("kernel sources", str(kernels)))
    for name in _SWITCHES:  # FLASHTUNE_DB may hold a password: this output goes into bug reports
        lines.append((name, hide_url_password(_switch_value(name))))
    for name in _unknown_switches():
        lines.append((name, _unknown_value(name)))
    width = max(len(k) for k, _ in lines)
    for key, value in lines:
        # Every line, not only the switches': the cache folder's lines show FLASHTUNE_CACHE_DIR
        # expanded, and an error text may quote a value (an escape sequence must not reach
        # the terminal raw).
        print(f"{key.ljust(width)}  {printable(value)}")
    return 0
