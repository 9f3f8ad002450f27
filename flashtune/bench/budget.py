"""The wall-clock budget of one ``flashtune bench`` run, split into phases.

Each phase (softmax cases, attention cases) owns a window ending at a fixed share of the
budget. Past 70% of its window a phase runs "lean" (the peers that compile per shape, i.e.
torch.compile and FlexAttention, are skipped); past its end the remaining cases are recorded as
skipped. The last share is left for host overhead, tuning history and writing the report.
"""

from __future__ import annotations

import time

LEAN_AT = 0.7


class Phase:
    def __init__(self, start: float, deadline: float, clock):
        self.start, self.deadline, self._clock = start, deadline, clock

    def state(self) -> str:
        """"run", "lean" or "skip" for the next case."""
        now = self._clock()
        if now >= self.deadline:
            return "skip"
        if now >= self.start + LEAN_AT * (self.deadline - self.start):
            return "lean"
        return "run"


class Budget:
    def __init__(self, total_s: float | None, clock=time.monotonic):
        if total_s is not None and (isinstance(total_s, bool) or not total_s > 0):
            raise ValueError(f"budget must be a number of seconds > 0, got {total_s!r}")
        self.total_s = total_s
        self._clock = clock
        self.started = clock()

    def elapsed(self) -> float:
        return self._clock() - self.started

    def phase(self, until_share: float) -> Phase:
        """A phase from now until ``until_share`` of the budget (never ends without a budget)."""
        now = self._clock()
        if self.total_s is None:
            return Phase(now, float("inf"), self._clock)
        return Phase(now, max(now, self.started + until_share * self.total_s), self._clock)
