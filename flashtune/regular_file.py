"""Files in folders that others may share (the cache folder, an export's folder).

Opening a file that someone else may have put in its place (an import, a bench result, a
generated kernel): a regular file only, never a pipe or a device. Creating the temporary file
that an atomic write moves into place: with the mode a plain open would give the final file.
"""

from __future__ import annotations

import errno
import os
import secrets
import stat
from pathlib import Path
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


def create_new(path: Any) -> int:
    """A new file at ``path``, open for writing (its descriptor), with the mode a plain open
    gives: 0o666 less the umask. The kernel applies the umask to os.open's mode, so it is never
    read here: reading it means setting it (os.umask), which races with other threads.
    O_EXCL: FileExistsError for anything already there, a link someone put there included;
    O_BINARY: no newline translation on Windows (mkstemp sets it too)."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_BINARY", 0)
    return os.open(path, flags, 0o666)


_TEMP_NAME_BYTES = 200  # of the target's name in a temporary file's name


def create_temp_beside(target: Path) -> tuple[int, str]:
    """A new file next to ``target`` (its descriptor, open for writing, and its name), for an
    atomic write that ``os.replace``-s it over ``target``.

    Its mode is what a plain open would give (create_new): tempfile.mkstemp's 0o600 made files
    in a folder shared by a team (FLASHTUNE_CACHE_DIR on a shared disk, an export) unreadable
    to the others."""
    folder = target.parent if str(target.parent) else Path(".")
    # The name cut to leave room for ".", ".<12 hex>.tmp" within a file name's 255 bytes
    # (NAME_MAX): a target name the file system takes must get a temporary name it takes too.
    name = target.name
    while len(os.fsencode(name)) > _TEMP_NAME_BYTES:
        name = name[:-1]
    for _ in range(100):
        tmp = str(folder / f".{name}.{secrets.token_hex(6)}.tmp")
        try:
            return create_new(tmp), tmp
        except FileExistsError:
            continue
    raise FileExistsError(f"no free temporary name next to {target}")
