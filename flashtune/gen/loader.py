"""Write rendered source to the cache folder atomically and import it from that file.

Triton reads a kernel's source with ``inspect``, and tracebacks show file lines, so each variant
lives in a real file: ``<cache>/kernels/<op>_<hash>.py``. Writes go to a temporary file in the
same folder and are moved into place with ``os.replace``, so concurrent processes never see a
half-written file. Each variant is imported once per process, from the source it was rendered
to: a file found in the folder is compared with it (and replaced when it differs), never
trusted, and neither is any bytecode cached beside it.
"""

from __future__ import annotations

import functools
import importlib.machinery
import importlib.util
import linecache
import os
import stat
import sys
import tempfile
import threading
from pathlib import Path
from types import ModuleType

from .. import paths
from ..forks import after_fork_in_child
from ..once import warn_once
from ..regular_file import create_temp_beside, open_regular_file
from .notices import DispatchWarning
from .render import RenderedVariant

# Re-entrant: a signal handler runs in the thread it interrupts, maybe while this lock is held
# (writing and importing a kernel, which runs Triton's @jit), and one that calls flashtune with
# a new shape would wait forever on a plain lock. Safe to run inside: the inner load writes and
# imports its variant itself, even the one the outer load is importing (see load).
_lock = threading.RLock()
_loaded: dict[tuple[str, str, bool], ModuleType] = {}
# Triton's interpreter keeps a launch's state process-wide: the program id it is running (its
# builder's grid index), and tl.* patched to interpreted versions for the launch, put back when
# it ends. Two threads launching at once read each other's program ids (rows left unwritten or
# written twice) or run tl.* unpatched, so interpreted launches take turns (see
# _one_launch_at_a_time). Re-entrant for the reason _lock is.
_interpreter_lock = threading.RLock()


@after_fork_in_child
def _new_lock() -> None:
    global _lock, _interpreter_lock
    _lock = threading.RLock()
    _interpreter_lock = threading.RLock()


def _one_launch_at_a_time(launch, filename: str, lines: tuple):
    """``launch`` of an interpreted variant, run under _interpreter_lock, with the variant's
    rendered source (``lines``, its linecache entry) put back in linecache first: the
    interpreter reads a kernel's source when it first runs it, not when @triton.jit wraps it
    (as a GPU does, in load), and with linecache cleared since (linecache.clearcache()) it
    would read the file in the cache folder, edited or not, or find no source at all.

    numpy's floating-point warnings are off during the launch: the interpreter computes on
    numpy, which warns on IEEE results the kernels mean (-inf - -inf in masked lanes, exp
    overflowing to inf), and with warnings as errors (``-W error``) every call raised."""
    @functools.wraps(launch)
    def run(*args, **kwargs):
        def call():
            linecache.cache[filename] = lines
            return launch(*args, **kwargs)
        return run_interpreted(call)
    return run


def run_interpreted(call):
    """``call()`` as an interpreted launch runs (see _one_launch_at_a_time): one at a time,
    numpy's floating-point warnings off. For launches of a loaded variant's kernel outside its
    launch() (the bench's bare ``kernel[grid](...)``) under the interpreter."""
    import numpy as np  # the interpreter's own dependency

    with _interpreter_lock, np.errstate(all="ignore"):
        return call()


def interpreter_mode() -> bool:
    """Whether Triton runs kernels in its interpreter, as Triton itself reads TRITON_INTERPRET
    (3.9: 1, true, yes, on or y, any case). A reading of our own took "false" as on: CPU tensors
    then went to kernels that Triton compiled for a GPU."""
    try:
        from triton import knobs  # Triton >= 3.3
    except ImportError:
        return os.environ.get("TRITON_INTERPRET", "0") == "1"  # older Triton's @jit test
    return bool(knobs.runtime.interpret)


def source_path(variant: RenderedVariant) -> Path:
    return paths.kernel_dir() / f"{variant.module_name}.py"


def fallback_kernel_dir() -> Path:
    """Where kernels go when the cache folder cannot be written: a per-user temp folder."""
    user = getattr(os, "getuid", lambda: "user")()
    return Path(tempfile.gettempdir()) / f"flashtune-{user}" / "kernels"


def _holds(path: Path, data: bytes) -> bool:
    """Whether path is a regular file holding exactly ``data``. Opened without blocking and
    checked on the open file: a pipe put there would block a plain open forever, and a huge
    file is not read."""
    try:
        with open_regular_file(path) as f:
            return os.fstat(f.fileno()).st_size == len(data) and f.read(len(data) + 1) == data
    except OSError:  # missing, unreadable or no regular file: (re)written, which reports
        return False  # a real problem


def _write_atomically(variant: RenderedVariant, path: Path) -> Path:
    data = variant.source.encode("utf-8")
    if _holds(path, data):
        return path
    path.parent.mkdir(parents=True, exist_ok=True)
    # Readable by whoever shares the cache folder, as a plain open would make it (mkstemp's
    # 0o600 was not); the file is never trusted when read back, whoever can write it.
    fd, tmp = create_temp_beside(path)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)  # a full disk, a folder at path: leave no litter
        raise
    return path


def write_source(variant: RenderedVariant) -> Path:
    """Atomically write the variant's source (skipped when an identical file exists).

    If the cache folder cannot be written (a read-only home, a path through a file) or named
    (FLASHTUNE_CACHE_DIR with a ~ that cannot be expanded), the source goes to a per-user temp
    folder instead, with one warning: a user's model keeps running. When that fails too,
    OSError naming both (``load`` then runs the kernel without a file).
    """
    try:
        path = source_path(variant)
    except ValueError as err:  # FLASHTUNE_CACHE_DIR has a ~ that cannot be expanded
        return _write_to_temp(variant, os.environ.get("FLASHTUNE_CACHE_DIR", ""), err)
    try:
        return _write_atomically(variant, path)
    except OSError as err:
        return _write_to_temp(variant, path.parent, err)


def _write_to_temp(variant: RenderedVariant, folder: Path | str, err: Exception) -> Path:
    """write_source's fallback: the cache ``folder`` cannot hold the source (``err``)."""
    fallback = fallback_kernel_dir() / f"{variant.module_name}.py"
    try:
        _private_folder(fallback.parent)
        written = _write_atomically(variant, fallback)
    except OSError as err2:
        raise OSError(
            f"flashtune cannot write generated kernels to {folder} ({err}) nor to "
            f"{fallback.parent} ({err2}); set FLASHTUNE_CACHE_DIR to a writable folder"
        ) from err
    warn_once(("kernel folder unwritable", str(folder)), DispatchWarning,
              f"flashtune cannot write generated kernels to {folder} ({err}); using "
              f"{fallback.parent} instead (set FLASHTUNE_CACHE_DIR to a writable folder)")
    return written


def _private_folder(folder: Path) -> None:
    """Create ``folder`` and its parent for this user only, and refuse them if another user
    owns or can write either: the temp folder's name is predictable, and the kernels written
    there are imported (run) by this process, so a folder another user prepared could swap a
    file between our write and our import."""
    getuid = getattr(os, "getuid", None)  # POSIX; Windows temp folders are per user already
    for part in (folder.parent, folder):
        part.mkdir(mode=0o700, exist_ok=True)
        if getuid is None:
            continue
        st = os.lstat(part)
        if not stat.S_ISDIR(st.st_mode) or st.st_uid != getuid() or st.st_mode & 0o022:
            # Refused even when ours: files others put there while it was open could be
            # theirs to change after we compared them.
            raise OSError(f"{part} is not a private folder of this user (owner uid {st.st_uid}, "
                          f"mode {oct(st.st_mode & 0o777)}); flashtune will not import kernels "
                          "from it")


def _written_or_unwritten(variant: RenderedVariant) -> Path | None:
    """The variant's file, or None where no folder can be written at all (neither the cache
    folder nor the temp one), with one warning: the file is for people and tracebacks (the
    rendered source is what runs, from linecache), and the kernel cache's trouble must not
    stop a user's model."""
    try:
        return write_source(variant)
    except OSError as err:
        # One warning per process, whichever folders failed.
        warn_once("no kernel folder", DispatchWarning,
                  f"{err}; running the kernels without writing their source files")
        return None


def _key(variant: RenderedVariant) -> tuple[str, str, bool]:
    # The interpreter choice is made when @triton.jit runs, so it is part of the key.
    try:
        folder = paths.kernel_dir()
    except ValueError:  # a ~ in FLASHTUNE_CACHE_DIR that cannot be expanded: see write_source
        folder = fallback_kernel_dir()
    return (variant.module_name, str(folder), interpreter_mode())


def written_source(variant: RenderedVariant) -> Path | None:
    """Where the variant's source file really is, for FLASHTUNE_LOG: the cache folder's file,
    the temp folder's (the cache folder cannot be written), or None (no folder can be: the
    kernel runs from memory). ``source_path`` is only where the file should go. Written now
    if not loaded yet: the log line comes before the kernel's first load."""
    module = _loaded.get(_key(variant))
    if module is not None:
        where = getattr(module, "__file__", None)  # None: loaded from memory
        return None if where is None else Path(where)
    return _written_or_unwritten(variant)


def load(variant: RenderedVariant) -> ModuleType:
    """The imported module of a variant; rendered source is written and imported once."""
    key = _key(variant)
    module = _loaded.get(key)
    if module is not None:
        return module
    with _lock:
        module = _loaded.get(key)
        if module is None:
            path = _written_or_unwritten(variant)
            name = f"flashtune_kernels.{variant.module_name}"
            if path is None:  # no folder could hold the file: the source lives in memory only
                path = f"<flashtune kernel {variant.module_name}: source not written>"
                spec = importlib.machinery.ModuleSpec(name, None, origin=path)
            else:
                spec = importlib.util.spec_from_file_location(name, path)
                assert spec is not None and spec.loader is not None
            module = importlib.util.module_from_spec(spec)
            # The rendered source itself runs, not what the file or a __pycache__ .pyc beside
            # it holds by now (the import system would run a .pyc whose header matches the
            # file's size and time, whatever its code); Triton's inspect.getsource reads it
            # from linecache (an entry without mtime is never re-read from disk).
            filename = str(path)
            lines = (len(variant.source), None, variant.source.splitlines(True), filename)
            linecache.cache[filename] = lines
            code = compile(variant.source, filename, "exec", dont_inherit=True)
            sys.modules[name] = module
            try:
                exec(code, module.__dict__)
            except BaseException:
                if sys.modules.get(name) is module:  # not a nested load's module (see below)
                    del sys.modules[name]
                raise
            if key[2] and callable(getattr(module, "launch", None)):  # interpreted
                module.launch = _one_launch_at_a_time(module.launch, filename, lines)
            # A load inside this one (a signal handler's, see _lock) may have imported the
            # same variant meanwhile: one module per variant, the first one stored.
            module = _loaded.setdefault(key, module)
            sys.modules[name] = module
    return module
