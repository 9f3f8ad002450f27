"""Running the flashtune CLI inside a test."""

from __future__ import annotations

import warnings

from flashtune.cache import CacheWarning
from flashtune.cli import main


def run_cli(capsys, *argv) -> tuple[int, str, str]:
    """(exit code, stdout, stderr) of ``flashtune *argv``; cache warnings are not the subject."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", CacheWarning)
        rc = main(list(argv))
    out, err = capsys.readouterr()
    return rc, out, err
