"""Opening a file that someone else may have put in its place (an import, a bench result, a
generated kernel): a regular file only, never a pipe or a device."""

from __future__ import annotations

import errno
import os
import stat
from typing import Any, BinaryIO


class NotARegularFile(OSError):
    """A folder, device, pipe or socket where a regular file was expected."""


def open_regular_file(path: Any) -> BinaryIO:
    """The regular file at path, opened for binary reading; NotARegularFile for anything
    else. Opened without blocking, then checked on the open file: a plain open of a named pipe
    blocks forever, and a check before the open could see another file than the one opened."""
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise NotARegularFile(errno.EINVAL, "not a regular file")
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise
