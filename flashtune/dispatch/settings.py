"""Environment switches of the runtime dispatcher, read once per dispatcher state.

- ``FLASHTUNE_DISABLE=1``: ``flashtune.softmax`` and ``flashtune.log_softmax`` call the plain
  torch ops (no kernels, no database); ``flashtune.attention`` runs its kernel with the
  heuristic default config (no database).
- ``FLASHTUNE_LOG=1``: log one line per new problem (logger ``"flashtune"``, level INFO, to
  stderr unless the application configured that logger). Without it the same lines go out at
  DEBUG level, for applications that configure logging themselves.
- ``FLASHTUNE_DB`` and ``FLASHTUNE_CACHE_DIR`` are read by ``flashtune.cache`` and
  ``flashtune.paths``.

The boolean switches (these two and ``FLASHTUNE_FAST_LAUNCH``) are read by ``env_flag``.

The values are read when the dispatcher state is (re)built, not per call: reading ``os.environ``
costs about a microsecond, a tenth of the call budget. After changing them at run time, call
``flashtune.dispatch.reset()``.
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass

from ..gen.notices import DispatchWarning
from ..once import first_time, warn_at_user

LOGGER_NAME = "flashtune"
_TRUE = ("1", "true", "yes", "on")
_FALSE = ("0", "false", "no", "off")


def bool_word(text: str) -> bool | None:
    """1/true/yes/on: True, 0/false/no/off: False, in any case and with spaces around; any
    other text: None. The one reading of a boolean word: the switches here and the boolean
    tunables of `flashtune source` (--exp2 on) take the same words."""
    value = text.strip().lower()
    return True if value in _TRUE else False if value in _FALSE else None


def env_flag(name: str, default: bool = False, notices: list[str] | None = None) -> bool:
    """A boolean FLASHTUNE_* switch: 1/true/yes/on or 0/false/no/off, in any case and with
    spaces around; unset or blank (as for FLASHTUNE_DB): ``default``. Another value gives
    ``default`` too, with one DispatchWarning per value, so that a typo does not silently leave
    a switch as it was; with ``notices``, that warning's message is appended there instead
    (the caller says it)."""
    raw = os.environ.get(name, "")
    value = bool_word(raw)
    if value is not None:
        return value
    if raw.strip() and first_time(("ignored switch", name, raw)):
        # No "flashtune:" prefix: the name says whose switch it is, and the CLI puts
        # "flashtune <command>: warning:" before our warnings.
        message = (f"{name}={raw!r} is ignored (expected 1/true/yes/on or 0/false/no/off); "
                   f"using the default, {'on' if default else 'off'}")
        if notices is not None:
            notices.append(message)
        else:
            warn_at_user(message, DispatchWarning)
    return default


def as_set(name: str) -> str:
    """``NAME=value`` as the environment has it (for messages: a switch turned on with "yes"
    is not reported as "=1")."""
    return f"{name}={os.environ.get(name, '').strip()}"


@dataclass(frozen=True)
class Settings:
    disabled: bool
    log: bool
    interpreter: bool  # TRITON_INTERPRET: CPU tensors run our kernels in Triton's interpreter

    @classmethod
    def from_env(cls, notices: list[str] | None = None) -> "Settings":
        """``notices``: see env_flag."""
        from ..gen.loader import interpreter_mode

        return cls(disabled=env_flag("FLASHTUNE_DISABLE", notices=notices),
                   log=env_flag("FLASHTUNE_LOG", notices=notices),
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
