"""Optuna's own study storage (not the winner cache: that is ``flashtune.cache.TuneDB``).

- Default: in memory. A study lives as long as the ``flashtune tune`` process.
- ``--journal PATH``: ``JournalStorage`` over a ``JournalFileBackend`` (an append-only log with
  file locking). An interrupted tune resumes: the study is loaded by name, its measured configs
  are not measured again.
- Several processes on several GPUs: start one ``flashtune tune`` per GPU
  (``CUDA_VISIBLE_DEVICES=i``), each with its own share of the problems, all pointing at the
  same ``--journal`` file on a local or NFS disk, or at an RDB URL (PostgreSQL, MySQL:
  ``--journal postgresql://...``). Plain SQLite is not meant for concurrent writers (whole-file
  locks, "database is locked"); the journal file is. Study names contain the device name and
  capability, so identical GPUs share a study (ask/tell is safe across processes: each process
  asks its own trials, TPE's constant liar keeps them apart) and different GPUs never mix
  timings. Each process keeps its own worker process, so a faulting kernel only restarts that
  GPU's worker. The winner cache (TuneDB) takes concurrent upserts (one atomic write each):
  a tuner's winner replaces the bucket's row only while it is the one that tuner read and
  measured; a winner another tuner stored meanwhile stays unless the new one is faster.
"""

from __future__ import annotations

import hashlib
import os

from ..paths import expand_home


def make_storage(spec: str | None):
    """None -> in memory; ``scheme://...`` -> an RDB URL; anything else -> a journal file path."""
    if spec is None:
        return None
    if "://" in spec:
        return spec  # optuna.create_study takes an RDB URL as is
    from optuna.storages import JournalStorage

    try:
        from optuna.storages.journal import JournalFileBackend
    except ImportError:  # optuna < 4.0 spelled it JournalFileStorage
        from optuna.storages import JournalFileStorage as JournalFileBackend
    # "~" is expanded here as in the CLI's up-front check of the path (the shell does not
    # expand it in --journal=~/x, and Optuna would make a folder named "~"), by the same helper.
    # Absolute: Optuna's lock is a symbolic link to the path as given, so a relative one with
    # a folder in it (runs/j.log) pointed at runs/runs/j.log; the lock a killed run left then
    # never read as stale, and the next run waited on it for ever.
    path = os.path.abspath(expand_home(spec, "journal"))
    try:
        return JournalStorage(JournalFileBackend(path))  # replays every record now
    except OSError:
        raise  # names the file itself
    except Exception as err:  # noqa: BLE001 - whatever Optuna's replay raises
        # A record edited by hand, or one of a newer Optuna: Optuna's bare ValueError,
        # IndexError, JSONDecodeError or "AssertionError: Should not reach." named no file.
        raise ValueError(f"journal {spec} holds records this Optuna cannot replay "
                         f"({type(err).__name__}: {err}); give a new journal, or move this "
                         "one away") from None


def study_name(device_name: str, capability: str, family_hash: str, op: str, dtype: str,
               bucket_json: str) -> str:
    """One study per (device, op, dtype, problem bucket, template family)."""
    return f"flashtune/{device_name}/{capability}/{family_hash}/{op}/{dtype}/{bucket_json}"


def study_seed(base_seed: int, name: str) -> int:
    """A per-study sampler seed: reproducible, and different problems explore differently."""
    digest = hashlib.sha256(f"{base_seed}/{name}".encode()).digest()
    return int.from_bytes(digest[:4], "little")
