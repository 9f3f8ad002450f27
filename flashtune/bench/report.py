"""The Markdown report and the console summary, both rendered from a bench result (the JSON).

``flashtune report`` re-renders them from a saved JSON, so everything here reads only the
result dict: no GPU, no database.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ..regular_file import NotARegularFile, open_regular_file
from .peers import ATTENTION_PEERS, BACKWARD_PEERS, FLASHTUNE, SOFTMAX_PEERS

SCHEMA = "flashtune-bench/1"
JSON_NAME = "flashtune_bench.json"
MARKDOWN_NAME = "flashtune_bench.md"
STATUS_MARK = {"unavailable": "n/a", "failed": "fail", "skipped": "skip"}


# A result holds a few hundred rows (about 200 KB); a file far larger is not one.
MAX_RESULT_BYTES = 64 * 2**20


def _read_result(path: Path) -> bytes:
    """The bytes of the regular file at path, read at most MAX_RESULT_BYTES: a device
    (/dev/zero) would be read until memory runs out, a named pipe would block forever."""
    try:
        handle = open_regular_file(path)
    except NotARegularFile:
        raise ValueError(f"{path}: not a regular file (a folder, device, pipe or socket); "
                         f"give the {JSON_NAME} of a bench run") from None
    except OSError as err:
        # The path and the reason in words, as `flashtune import` says them: the bare
        # "[Errno 13] Permission denied: 'd/r.json'" reached the user otherwise. A link loop or
        # a folder on the path this user may not search is said as the other commands say it.
        from ..cache.engine import why_unseen

        unseen = why_unseen(path)
        raise OSError(f"{path}: {unseen or f'cannot read ({err.strerror or err})'}") from None
    with handle:
        raw = handle.read(MAX_RESULT_BYTES + 1)
    if len(raw) > MAX_RESULT_BYTES:
        raise ValueError(f"{path}: too large for a bench result (at most "
                         f"{MAX_RESULT_BYTES // 2**20} MiB)")
    return raw


def load_result(path: Any) -> dict:
    """A result written by ``flashtune bench``; ValueError naming the file if it is not one."""
    path = Path(path)
    raw = _read_result(path)
    try:
        # utf-8-sig: a leading byte order mark (a result re-saved by a Windows editor) is
        # dropped, as `flashtune import` does for a winners file
        data = json.loads(raw.decode("utf-8-sig"))
    except RecursionError:
        raise ValueError(f"{path}: not a bench result (JSON nested too deeply)") from None
    except (ValueError, UnicodeDecodeError) as err:  # JSONDecodeError, or an integer too long
        raise ValueError(f"{path}: not JSON ({err})") from None
    schema = data.get("schema") if isinstance(data, dict) else None
    if isinstance(schema, str) and schema.startswith("flashtune-bench/") and schema != SCHEMA:
        # a bench result all the same: say so, not "not a bench result"
        raise ValueError(f"{path}: a bench result of another flashtune version (schema "
                         f"{schema[:40]!r}); this flashtune reads schema {SCHEMA!r}")
    if schema != SCHEMA:
        raise ValueError(f"{path}: not a flashtune bench result (expected schema {SCHEMA!r})")
    data.setdefault("backward", [])  # results written before the backward cases existed
    for key, kind in (("meta", dict), ("softmax", list), ("backward", list), ("attention", list)):
        if not isinstance(data.get(key), kind):
            raise ValueError(f"{path}: field {key!r} must be a {kind.__name__}")
    from .validate import ResultError, check_extras, check_rows

    try:
        check_rows("softmax", data["softmax"])
        check_rows("backward", data["backward"])
        check_rows("attention", data["attention"])
        check_extras(data)
    except ResultError as err:
        raise ValueError(f"{path}: {err}") from None
    return data


def fmt(value: float | None) -> str:
    if value is None:
        return "-"
    return f"{value:.0f}" if abs(value) >= 100 else f"{value:.3g}"


def group_cases(rows: list[dict]) -> list[dict[str, dict]]:
    """Rows of one case (op, shape, dtype, causal) together, impl -> row, in run order."""
    cases: dict[tuple, dict[str, dict]] = {}
    for r in rows:
        cases.setdefault((r["op"], r["shape"], r["dtype"], r.get("causal")), {})[r["impl"]] = r
    return list(cases.values())


def _cell(row: dict | None, key: str) -> str:
    if row is None:
        return "missing"
    if row.get("status") != "ok":
        return STATUS_MARK.get(row.get("status"), "?")
    mark = "" if row.get("check", {}).get("ok", True) else " (wrong!)"
    return fmt(row.get(key)) + mark


def passed(row: dict | None) -> bool:
    """Timed, and its output passed the correctness check (what _cell shows unmarked)."""
    return row is not None and row.get("status") == "ok" and row.get("check", {}).get("ok", True)


def _ratio(case: dict[str, dict], peer: str) -> str:
    """flashtune's speedup over ``peer`` in this case; "-" without one, or where either output
    failed its check (a result written before add_speedups left those out may hold one)."""
    ours = case.get(FLASHTUNE)
    value = (ours or {}).get("speedup", {}).get(peer)
    if value is None or not (passed(ours) and passed(case.get(peer))):
        return "-"
    return f"{value:.2f}" if value >= 0.1 else f"{value:.2g}"


def _dispatch(ours: dict | None) -> str:
    info = (ours or {}).get("dispatch") or {}
    if "how" not in info:
        return "-"
    config = info.get("config") or {}
    if not config:  # no kernel config ran (FLASHTUNE_DISABLE=1: torch)
        return info["how"]
    if "regime" in config:
        from ..dispatch.info import compact_config

        return f"{info['how']}: {compact_config(config)}"
    keys = ("BLOCK_M", "BLOCK_N", "num_warps", "num_stages")
    tile = " ".join(f"{k}={config[k]}" for k in keys if k in config)
    flags = [k for k in ("tma", "warp_specialize", "persistent") if config.get(k)]
    return f"{info['how']}: {tile}" + (" +" + ",".join(flags) if flags else "")


def _gbs_table(rows: list[dict], peers: tuple[str, ...], op_column: bool) -> list[str]:
    """The GB/s table of a softmax section (forward, or backward with its op column)."""
    head = [*(["op"] if op_column else []), "shape", "dtype", "MiB", "flashtune GB/s", "% copy",
            *peers, *(f"x {p}" for p in peers), "flashtune config"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for case in group_cases(rows):
        ours = case.get(FLASHTUNE)
        first = next(iter(case.values()))
        frac = ours.get("frac_copy") if ours and ours.get("status") == "ok" else None
        # the goal's column: a wrong output's fraction is marked as its GB/s is (_cell)
        wrong = "" if passed(ours) else " (wrong!)"
        mib = first.get("mib")  # absent or null in a hand-edited result: shown as "-"
        cells = [*([first["op"]] if op_column else []), first["shape"], first["dtype"],
                 "-" if mib is None else f"{mib:.1f}", _cell(ours, "gbs"),
                 "-" if frac is None else f"{100 * frac:.0f}%{wrong}",
                 *(_cell(case.get(p), "gbs") for p in peers),
                 *(_ratio(case, p) for p in peers), _dispatch(ours)]
        lines.append("| " + " | ".join(cells) + " |")
    return lines


def softmax_table(result: dict) -> list[str]:
    copy = result.get("copy", {}).get("gbs")
    return (_gbs_table(result["softmax"], SOFTMAX_PEERS, op_column=False)
            + ["", f"Copy bandwidth: {fmt(copy)} GB/s."])


def backward_table(result: dict) -> list[str]:
    return _gbs_table(result["backward"], BACKWARD_PEERS, op_column=True)


def attention_table(result: dict) -> list[str]:
    head = ["shape (B,H,N,D)", "dtype", "causal", "flashtune TFLOP/s", *ATTENTION_PEERS,
            *(f"x {p}" for p in ATTENTION_PEERS), "flashtune config"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for case in group_cases(result["attention"]):
        ours = case.get(FLASHTUNE)
        f = next(iter(case.values()))
        cells = [f"{f['B']},{f['H']},{f['N']},{f['D']}", f["dtype"], str(int(f["causal"])),
                 _cell(ours, "tflops"), *(_cell(case.get(p), "tflops") for p in ATTENTION_PEERS),
                 *(_ratio(case, p) for p in ATTENTION_PEERS), _dispatch(ours)]
        lines.append("| " + " | ".join(cells) + " |")
    return lines


def notes(result: dict) -> list[str]:
    """Every row that did not produce a correct timing, grouped by (impl, status, reason)."""
    groups: dict[tuple, list[str]] = {}
    for r in _all_rows(result):
        causal = " causal" if r.get("causal") else ""
        case = f"{r['op']} {r['shape']} {r['dtype']}{causal}"
        if r.get("status") != "ok":
            groups.setdefault((r["impl"], r.get("status"), r.get("error") or ""), []).append(case)
        elif "check" not in r:
            groups.setdefault((r["impl"], "timed without a check", "its row holds none"),
                              []).append(case)
        elif not r.get("check", {}).get("ok", True):
            groups.setdefault((r["impl"], "wrong output", r["check"].get("detail", "")), []).append(case)
    lines = []
    for (impl, status, reason), cases in groups.items():
        shown = ", ".join(cases[:4]) + (f" and {len(cases) - 4} more" if len(cases) > 4 else "")
        lines.append(f"- **{impl}** {status} in {len(cases)} case(s) ({shown}): {reason}")
    return lines or ["- none: every implementation ran and passed its check in every case"]


def _all_rows(result: dict) -> list[dict]:
    return result["softmax"] + result.get("backward", []) + result["attention"]


def checks_line(result: dict) -> str:
    timed = [r for r in _all_rows(result) if r.get("status") == "ok"]
    good = sum(1 for r in timed if r.get("check", {}).get("ok"))
    # A row may carry no check (validate allows it): counted apart, not as a failure, which
    # the tables (and passed()) do not show it as either.
    unchecked = sum(1 for r in timed if "check" not in r)
    apart = f" ({unchecked} timed without a check)" if unchecked else ""
    return (f"{good} of {len(timed) - unchecked} checked outputs pass{apart} the accuracy rule "
            "(max error vs float64 "
            "at most 1.1 x the reference peer's + 2 ulps; softmax: full float64 oracle, reference "
            "torch.softmax; backward: full float64 oracle, reference torch's backward, ulps at "
            "the scale of the row-sum term; attention: float64 oracle on sampled query rows of "
            "every batch and head, reference SDPA with torch's default backend).")


def tuning_lines(result: dict) -> list[str]:
    from .tuning import problem_label

    tuning = result.get("tuning") or {}
    problems = tuning.get("problems") or []
    if not problems:
        return [f"No tuning records ({tuning.get('note') or 'not collected'})."]
    lines = ["| problem | trials | first ok ms | best ms | winner ms |", "|---|---:|---:|---:|---:|"]
    for p in problems:
        ok = [t for t in p["trials"] if t["status"] == "ok"]
        first = ok[0]["median_ms"] if ok else None
        best = ok[-1]["best_ms"] if ok else None
        lines.append(f"| {problem_label(p)} | {len(p['trials'])} | {fmt4(first)} | {fmt4(best)} | "
                     f"{fmt4(p.get('winner_ms'))} |")
    return lines


def fmt4(value: float | None) -> str:
    return "-" if value is None else f"{value:.4f}"


def header(meta: dict) -> list[str]:
    commit = meta.get("git_commit") or "unknown"
    if meta.get("git_dirty"):
        commit += " (uncommitted changes)"
    mode = meta.get("mode", "?")
    budget = "no budget" if meta.get("budget_s") is None else f"budget {fmt(meta['budget_s'])} s"
    return [f"{meta.get('device', '?')}, {str(meta.get('date', '?'))[:19]} UTC; torch "
            f"{meta.get('torch')}, triton {meta.get('triton')}, flashtune {meta.get('flashtune')}, "
            f"commit {commit}; mode {mode}; wall {fmt(meta.get('wall_s'))} s ({budget})."
            + (" **Interrupted**: the cases after the last row shown were not run."
               if meta.get("interrupted") else ""), "",
            f"Timing: {meta.get('timing', '?')}. Inputs: randn, fixed seed. "
            "flashtune runs through its public API (flashtune.softmax / flashtune.attention) with "
            "the tuned winners of the cache; `x PEER` = peer time / flashtune time (> 1: flashtune "
            "is faster). n/a: unavailable here, fail: raised, skip: budget (see Notes)."]


def markdown(result: dict, plots: list[str]) -> str:
    out = ["# flashtune benchmark", "", *header(result["meta"]), ""]
    if result["softmax"]:
        out += ["## Softmax forward (GB/s = 2 x bytes(x) / time)", "", *softmax_table(result), ""]
    if result.get("backward"):
        out += ["## Softmax backward (GB/s = 3 x bytes(x) / time: y and dy read, dx written)", "",
                "flashtune: the eager backward its autograd runs (the tuned winner of the "
                "backward op, else its default config); torch: `aten._softmax_backward_data` / "
                "`aten._log_softmax_backward_data`, what torch.softmax's autograd runs.", "",
                *backward_table(result), ""]
    if result["attention"]:
        out += ["## Attention forward (TFLOP/s = 4 B H N^2 D / time, x 0.5 causal)", "",
                *attention_table(result), ""]
    out += ["## Correctness", "", checks_line(result), "", "## Notes", "", *notes(result), ""]
    overhead = result.get("overhead")
    if overhead:
        from .overhead import overhead_markdown

        out += ["## Host overhead per call", ""]
        out += overhead_markdown(overhead) if "results" in overhead else \
            [f"Not measured: {overhead.get('error', '?')}"]
        out.append("")
    out += ["## Tuning history", "", *tuning_lines(result), ""]
    if plots:
        out += ["## Plots", "", *(f"![{Path(p).stem}]({Path(p).name})" for p in plots), ""]
    return "\n".join(out)


def summary(result: dict) -> str:
    """The short table printed last: flashtune's number and its ratio to each peer per case."""
    lines = []
    for section, key, unit, peers in (("softmax", "gbs", "GB/s", SOFTMAX_PEERS),
                                      ("backward", "gbs", "GB/s", BACKWARD_PEERS),
                                      ("attention", "tflops", "TFLOP/s", ATTENTION_PEERS)):
        if not result.get(section):
            continue
        lines.append(f"{section} ({unit}; x PEER = peer time / flashtune time)")
        lines.append(f"  {'case':40s} {'flashtune':>10s} " + " ".join(f"{p:>14s}" for p in peers))
        for case in group_cases(result[section]):
            ours = case.get(FLASHTUNE)
            f = next(iter(case.values()))
            name = f"{f['shape']} {f['dtype']}" + (" causal" if f.get("causal") else "")
            if section == "backward":
                name = f"{f['op'].replace('_backward', '')} {name}"
            ratios = " ".join(f"{'x ' + _ratio(case, p):>14s}" if _ratio(case, p) != "-"
                              else f"{_cell(case.get(p), key):>14s}" for p in peers)
            lines.append(f"  {name:40s} {_cell(ours, key):>10s} {ratios}")
    return "\n".join(lines)
