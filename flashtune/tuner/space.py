"""The search space of one study: gen's candidate list, pruned, as conditional categoricals.

Why per-parameter categoricals and not one categorical over candidate indices: TPE learns a
distribution per parameter, so "num_warps=8 was good" carries over to untried configs; over
10,000 opaque indices TPE is random search. The space is conditional on ``regime``: each regime
gets its own parameter names (``online.block``), and a knob a regime pins to one value (the row
regime's num_stages) is not suggested at all, so TPE never wastes effort on knobs that do
nothing. Choices are the values that occur among the candidates, so each name always has the
same distribution (Optuna needs that across trials).

Some combinations of individually valid values are still invalid (``num_warps * 32 >
block``, split segments longer than the row), and a subsampled candidate list (the evaluation's
capped grid) makes most combinations invalid. Such a trial is told PRUNED at once (nothing is
compiled; TPE ranks pruned trials below every completed one and learns to avoid them) and the
nearest unmeasured candidate (fewest differing knobs) is enqueued as the next trial, so every
proposal leads to at most one extra ask and TPE's region is still what gets measured. A repeat
of a measured config is answered from the memo and handled the same way.

Before any of that, ``prune`` drops configs that cannot work on the device: too much shared
memory for the pipelined chunk loop, or more fp32 values per thread than registers.
"""

from __future__ import annotations

import json
from typing import Any, Iterable, Mapping

from ..gen.softmax_space import HOLDING_REGIMES
from ..gen.space import Config

BRANCH = "regime"
MAX_VALUES_PER_THREAD = 256  # fp32 values a thread holds for a whole-row tile (255 registers)


def canonical(config: Mapping[str, Any]) -> str:
    """A config's key: its JSON with sorted keys. A Config holds its items sorted by name
    already: its plain dict is encoded as it is (half the time, over the ~100 000 candidates
    of a problem's search space)."""
    if isinstance(config, Config):
        return _COMPACT.encode(config.as_dict())
    return _COMPACT_SORTED.encode(dict(config))


_COMPACT = json.JSONEncoder(separators=(",", ":"))
_COMPACT_SORTED = json.JSONEncoder(sort_keys=True, separators=(",", ":"))


def resource_misfit(config: Mapping[str, Any], dtype: str, max_shared_bytes: int | None,
                    streams: int = 1) -> str | None:
    """Why a config cannot work on this device (estimate, before compiling), or None."""
    threads = config.get("num_warps", 4) * 32
    tile = config.get("block", 0) * config.get("rows_per_program", 1)
    if config.get("regime") in HOLDING_REGIMES and tile / threads > MAX_VALUES_PER_THREAD:
        return (f"register estimate: {tile // threads} fp32 values per thread "
                f"(> {MAX_VALUES_PER_THREAD}) for a {tile}-element tile on {threads} threads")
    if max_shared_bytes is not None and config.get("regime") in ("online", "split"):
        # A pipelined load keeps (num_stages - 1) chunks per streamed tensor in shared memory.
        elem = 4 if dtype == "float32" else 2
        stages = config.get("num_stages", 1)
        need = max(0, stages - 1) * config.get("block", 0) * elem * streams
        if need > max_shared_bytes:
            return f"shared memory estimate {need} B > {max_shared_bytes} B"
    return None


def prune(candidates: Iterable[Config], dtype: str, max_shared_bytes: int | None, streams: int = 1):
    """(kept, pruned) where pruned is a list of (config, reason); streams: tensors read per chunk."""
    kept, pruned = [], []
    for config in candidates:
        reason = resource_misfit(config, dtype, max_shared_bytes, streams)
        (pruned.append((config, reason)) if reason else kept.append(config))
    return kept, pruned


def _sort_values(values) -> list:
    return sorted(values, key=lambda v: (str(type(v)), v))


class SearchSpace:
    def __init__(self, candidates: list[Config]):
        if not candidates:
            raise ValueError("no candidate configs to search")
        self.candidates = list(candidates)
        self.by_key = {canonical(c): c for c in self.candidates}
        self._sorted_keys = sorted(self.by_key)
        names = list(self.candidates[0])
        self.branched = BRANCH in names
        groups: dict[Any, list[Config]] = {}
        for c in self.candidates:
            groups.setdefault(c[BRANCH] if self.branched else "", []).append(c)
        self.branches = _sort_values(groups)
        # per branch: name -> choices (suggested) ; name -> value (pinned)
        self.choices: dict[Any, dict[str, list]] = {}
        self.pinned: dict[Any, dict[str, Any]] = {}
        for branch, configs in groups.items():
            self.choices[branch], self.pinned[branch] = {}, {}
            for name in names:
                if self.branched and name == BRANCH:
                    continue
                values = _sort_values({c[name] for c in configs})
                if len(values) == 1:
                    self.pinned[branch][name] = values[0]
                else:
                    self.choices[branch][name] = values

    def _param_name(self, branch, name: str) -> str:
        return f"{branch}.{name}" if self.branched else name

    def suggest(self, trial) -> Config | None:
        """The config a trial proposes, or None if that combination is not a candidate."""
        return self.by_key.get(canonical(self.propose(trial)))

    def nearest(self, raw: Mapping[str, Any], skip=frozenset()) -> Config | None:
        """The candidate (keys not in ``skip``) that differs from ``raw`` in the fewest knobs.

        Same branch first; ties go to the earliest candidate in canonical order, so the
        choice is deterministic. None when every candidate is skipped.
        """
        best, best_d = None, None
        for key in self._sorted_keys:
            if key in skip:
                continue
            c = self.by_key[key]
            d = sum(1 for name, value in raw.items() if c.get(name) != value)
            if self.branched and c[BRANCH] != raw.get(BRANCH):
                d += len(raw) + 1
            if best_d is None or d < best_d:
                best, best_d = c, d
        return best

    def propose(self, trial) -> dict[str, Any]:
        """The raw knob values a trial proposes (may be an invalid combination)."""
        raw: dict[str, Any] = {}
        branch = ""
        if self.branched:
            branch = (trial.suggest_categorical(BRANCH, self.branches)
                      if len(self.branches) > 1 else self.branches[0])
            raw[BRANCH] = branch
        for name, values in self.choices[branch].items():
            raw[name] = trial.suggest_categorical(self._param_name(branch, name), values)
        raw.update(self.pinned[branch])
        return raw

    def trial_params(self, config: Mapping[str, Any]) -> dict[str, Any]:
        """Optuna params that make ``suggest`` return ``config`` (for study.enqueue_trial)."""
        branch = config[BRANCH] if self.branched else ""
        params = {BRANCH: branch} if self.branched and len(self.branches) > 1 else {}
        for name in self.choices[branch]:
            params[self._param_name(branch, name)] = config[name]
        return params

    def distributions(self, config: Mapping[str, Any]) -> dict[str, Any]:
        """The Optuna distributions of ``trial_params(config)`` (those ``propose`` suggests)."""
        from optuna.distributions import CategoricalDistribution

        branch = config[BRANCH] if self.branched else ""
        found = ({BRANCH: CategoricalDistribution(self.branches)}
                 if self.branched and len(self.branches) > 1 else {})
        for name, values in self.choices[branch].items():
            found[self._param_name(branch, name)] = CategoricalDistribution(values)
        return found

    def __contains__(self, config: Mapping[str, Any]) -> bool:
        return canonical(config) in self.by_key

    def __len__(self) -> int:
        return len(self.candidates)
