"""Where flashtune keeps files on disk.

- Generated kernel source: ``$FLASHTUNE_CACHE_DIR/kernels`` (default: the platformdirs user
  cache folder, e.g. ``~/.cache/flashtune/kernels`` on Linux).
- The tuned-winner database: ``$FLASHTUNE_DB`` (any SQLAlchemy URL), else an SQLite file in
  the same cache folder.
"""

from __future__ import annotations

import os
from pathlib import Path

APP_NAME = "flashtune"


def cache_dir() -> Path:
    """The root cache folder (not created here)."""
    override = os.environ.get("FLASHTUNE_CACHE_DIR")
    if override and override.strip():  # set but blank: as if unset (as for FLASHTUNE_DB)
        return Path(override).expanduser()
    import platformdirs

    return Path(platformdirs.user_cache_dir(APP_NAME, appauthor=False))


def kernel_dir() -> Path:
    """Folder holding rendered kernel source files."""
    return cache_dir() / "kernels"
