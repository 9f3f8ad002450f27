"""Environment switches of the runtime dispatcher, read once per dispatcher state.

- ``FLASHTUNE_DISABLE=1``: ``flashtune.softmax`` and ``flashtune.log_softmax`` call the plain
  torch ops (no kernels, no database); ``flashtune.attention`` runs its kernel with the
  heuristic default config (no database).
- ``FLASHTUNE_LOG=1``: log one line per new problem (logger ``"flashtune"``, level INFO, to
  stderr unless the application configured that logger). Without it the same lines go out at
  DEBUG level, for applications that configure logging themselves.
- ``FLASHTUNE_DB`` and ``FLASHTUNE_CACHE_DIR`` are read by ``flashtune.cache`` and
  ``flashtune.paths``.

The values are read when the dispatcher state is (re)built, not per call: reading ``os.environ``
costs about a microsecond, a tenth of the call budget. After changing them at run time, call
``flashtune.dispatch.reset()``.
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass

LOGGER_NAME = "flashtune"
_TRUE = ("1", "true", "yes", "on")


def _flag(name: str) -> bool:
    return os.environ.get(name, "").strip().lower() in _TRUE


@dataclass(frozen=True)
class Settings:
    disabled: bool
    log: bool
    interpreter: bool  # TRITON_INTERPRET: CPU tensors run our kernels in Triton's interpreter

    @classmethod
    def from_env(cls) -> "Settings":
        from ..gen.loader import interpreter_mode

        return cls(disabled=_flag("FLASHTUNE_DISABLE"), log=_flag("FLASHTUNE_LOG"),
                   interpreter=interpreter_mode())

    @property
    def log_level(self) -> int:
        return logging.INFO if self.log else logging.DEBUG


def logger(settings: Settings) -> logging.Logger:
    """The "flashtune" logger; with FLASHTUNE_LOG=1 it prints to stderr unless configured."""
    log = logging.getLogger(LOGGER_NAME)
    if settings.log:
        if log.getEffectiveLevel() > logging.INFO:
            log.setLevel(logging.INFO)
        if not log.handlers and not logging.getLogger().handlers:
            handler = logging.StreamHandler()
            handler.setFormatter(logging.Formatter("flashtune: %(message)s"))
            log.addHandler(handler)
    return log
