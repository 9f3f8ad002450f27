"""Where flashtune keeps files on disk.

- Generated kernel source: ``$FLASHTUNE_CACHE_DIR/kernels`` (default: the platformdirs user
  cache folder, e.g. ``~/.cache/flashtune/kernels`` on Linux).
- The tuned-winner database: ``$FLASHTUNE_DB`` (an SQLite file path or URL, or a PostgreSQL
  URL; other backends are refused), else ``tuned.sqlite`` in the same cache folder.
"""

from __future__ import annotations

import os
from pathlib import Path

APP_NAME = "flashtune"


def expand_home(text: str, what: str) -> Path:
    """``Path(text)`` with a leading ``~`` or ``~user`` expanded. Where it cannot be (no such
    user, or no home folder: a uid without a passwd entry and no HOME), a ValueError naming
    ``what`` (the setting or option the path came from): pathlib's own RuntimeError named
    neither, and reached every flashtune call through the kernel folder."""
    try:
        return Path(text).expanduser()
    except RuntimeError:
        raise ValueError(f"{what}: cannot expand the ~ of {text!r} (no such user, or no home "
                         "folder); give the path without ~") from None


def cache_dir() -> Path:
    """The root cache folder (not created here); ValueError for an unexpandable ``~``."""
    override = os.environ.get("FLASHTUNE_CACHE_DIR")
    if override and override.strip():  # set but blank: as if unset (as for FLASHTUNE_DB)
        return expand_home(override, "FLASHTUNE_CACHE_DIR")
    import platformdirs

    return Path(platformdirs.user_cache_dir(APP_NAME, appauthor=False))


def kernel_dir() -> Path:
    """Folder holding rendered kernel source files."""
    return cache_dir() / "kernels"
