"""Progress of a tuning run: tqdm if installed, else one stderr line (rewritten on a terminal)."""

from __future__ import annotations

import sys
import time


def _fmt_s(seconds: float) -> str:
    seconds = max(0, int(seconds))
    return f"{seconds // 60}:{seconds % 60:02d}"


class Progress:
    """One bar per problem: trials done of the budget, ETA, best time so far."""

    def __init__(self, enabled: bool = True, stream=None):
        self.enabled = enabled
        self.stream = stream or sys.stderr
        self._bar = None
        self._label = ""
        self._total = 0
        self._t0 = 0.0
        self._last_line = 0.0

    def start(self, label: str, total: int) -> None:
        self.close()
        self._label, self._total, self._t0 = label, total, time.monotonic()
        if not self.enabled:
            return
        try:
            from tqdm import tqdm
        except ImportError:
            self._bar = None
        else:
            self._bar = tqdm(total=total, desc=label, file=self.stream, unit="trial", leave=True)

    def update(self, done: int, best_ms: float | None, note: str = "") -> None:
        if not self.enabled:
            return
        best = f"{best_ms:.4f} ms" if best_ms is not None else "-"
        if self._bar is not None:
            self._bar.n = done
            self._bar.set_postfix_str(f"best {best}{' ' + note if note else ''}", refresh=True)
            return
        now = time.monotonic()
        interactive = getattr(self.stream, "isatty", lambda: False)()
        if not interactive and now - self._last_line < 5 and done < self._total:
            return  # log files get a line every few seconds, not one per trial
        self._last_line = now
        elapsed = now - self._t0
        eta = elapsed / done * (self._total - done) if done else 0.0
        line = (f"{self._label}: {done}/{self._total} trials, elapsed {_fmt_s(elapsed)}, "
                f"ETA {_fmt_s(eta)}, best {best}{' ' + note if note else ''}")
        self.stream.write(("\r" + line + "\033[K") if interactive else line + "\n")
        self.stream.flush()

    def message(self, text: str) -> None:
        if not self.enabled:
            return
        if self._bar is not None:
            self._bar.write(text, file=self.stream)
        else:
            self.stream.write(text + "\n")
            self.stream.flush()

    def close(self) -> None:
        if self._bar is not None:
            self._bar.close()
            self._bar = None
        elif self.enabled and self._label and getattr(self.stream, "isatty", lambda: False)():
            self.stream.write("\n")
        self._label = ""
