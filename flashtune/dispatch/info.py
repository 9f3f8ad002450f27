"""Facts the command line reports: this machine's device, the database location, versions."""

from __future__ import annotations

from typing import Any

from ..gen.softmax_space import HOLDING_REGIMES, SPLITTING_REGIMES


def current_device_info():
    """The DeviceInfo kernels run on now (the current GPU, or the Triton interpreter)."""
    from ..cache import DeviceInfo

    return DeviceInfo.current()


def database_location(url: Any = None) -> tuple[str, str | None]:
    """(URL with the password hidden, SQLite file path or None) without opening anything."""
    from ..cache.engine import display, resolve_url, sqlite_file

    resolved = resolve_url(url)
    path = sqlite_file(resolved)
    return display(resolved), (str(path) if path is not None else None)


def database_missing(url: Any = None) -> str | None:
    """The SQLite file's path when it does not exist yet (opening it would create it), else
    None. Something else at that path (a folder, a pipe, a device) is not missing, and neither
    is a path that cannot be looked at (a link loop, a folder on it this user may not search):
    None, and opening it (TuneDB) raises a CacheError that says why. (show and clear said "no
    winner database at DIR (a folder)" and exit status 0, and advised `flashtune tune`, which
    then refused the path.)"""
    from ..cache.engine import no_file_there, why_unseen

    _, path = database_location(url)
    if path is None or no_file_there(path) != "missing" or why_unseen(path) is not None:
        return None
    return path


def compact_config(config: dict) -> str:
    """A one-line config: the regime's knobs only (the pinned ones say nothing)."""
    if "BLOCK_M" in config:  # attention_fwd
        parts = [f"M{config.get('BLOCK_M')}", f"N{config.get('BLOCK_N')}",
                 f"warps={config.get('num_warps')}", f"stages={config.get('num_stages')}"]
        if config.get("pv_acc") not in (None, "fp32"):
            parts.append(f"pv_acc={config.get('pv_acc')}")
        flags = [name for name in ("exp2", "persistent", "tma", "warp_specialize") if config.get(name)]
        if flags:
            parts.append("+" + ",".join(flags))
        return " ".join(parts)
    regime = config.get("regime")
    parts = [str(regime), f"block={config.get('block')}"]
    if regime == "row":
        parts.append(f"rows={config.get('rows_per_program')}")
    if regime in SPLITTING_REGIMES:
        parts.append(f"splits={config.get('splits')}")
    parts.append(f"warps={config.get('num_warps')}")
    if regime not in HOLDING_REGIMES:
        parts.append(f"stages={config.get('num_stages')}")
    if config.get("resident"):
        parts.append(f"resident={config.get('resident')}")
    if config.get("programs_per_sm"):
        parts.append(f"persistent={config.get('programs_per_sm')}/SM")
    flags = [name for name in ("exp2", "lane_stats", "vector_stats", "max_pass", "l2_hint", "align", "fused",
                               "paired_loads")
             if config.get(name)]
    if flags:
        parts.append("+" + ",".join(flags))
    return " ".join(parts)
