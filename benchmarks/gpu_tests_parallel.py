"""Run a GPU test selection as N parallel pytest processes (shards) on one GPU.

GPU tests here are compile-bound (each variant compiles once, about a second of CPU), so one
pytest process leaves the GPU idle most of the time: 14 shards ran the 675-test softmax matrix in
69 s on a 16-core H100 host instead of about ten minutes. Test ids come from
``pytest --collect-only -m MARK`` and are dealt round-robin; each shard writes its own log under
$OUT (or the current folder), and a summary (totals, failed ids) is printed last. Tests that
fail in a shard are re-run alone afterwards (one process): shards share the GPU's memory, and
a test can run out of it only because others held it at the same moment. The run fails only if
a test also fails alone.

Usage: python benchmarks/gpu_tests_parallel.py N TAG [pytest args: files, -k ...]
       MARK="gpu or not gpu" python benchmarks/gpu_tests_parallel.py ...  (default MARK: gpu)
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time


def main(argv: list[str]) -> int:
    if len(argv) < 3:
        print(__doc__)
        return 2
    n, tag, args = int(argv[1]), argv[2], argv[3:]
    mark = os.environ.get("MARK", "gpu")
    out = os.environ.get("OUT", ".")
    base = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-m", mark]
    collected = subprocess.run(base + ["--collect-only", "-q"] + args, capture_output=True, text=True)
    ids = [line.strip() for line in collected.stdout.splitlines() if "::" in line]
    print(f"{tag}: {len(ids)} tests in {n} shards", flush=True)
    t0 = time.time()
    shards = []
    for i in range(n):
        part = ids[i::n]
        if part:
            log = open(os.path.join(out, f"{tag}_shard{i}.log"), "w")
            proc = subprocess.Popen(base + ["-q", "-rfE"] + part, stdout=log, stderr=subprocess.STDOUT)
            shards.append((i, proc, log))
    totals: dict[str, int] = {}
    failed_ids: list[str] = []
    crashed = False
    for i, proc, log in shards:
        proc.wait()
        log.close()
        summary, failures = _read_log(log.name)
        print(f"shard {i} rc={proc.returncode}: {summary}", flush=True)
        for line in failures:
            print("   ", line[:300], flush=True)
        # "FAILED <id> - <message>"; ids may hold spaces ("[...-fused split]")
        failed_ids += [line.split(" ", 1)[1].split(" - ", 1)[0] for line in failures]
        for count, what in re.findall(r"(\d+) (passed|failed|skipped|errors?)", summary):
            totals[what] = totals.get(what, 0) + int(count)
        crashed = crashed or (proc.returncode != 0 and not failures)
    print(f"{tag}: total {totals} in {time.time() - t0:.0f}s", flush=True)
    if not failed_ids:
        return 1 if crashed or not shards else 0
    # Shards share one GPU's memory: a test that allocates gigabytes can run out of memory only
    # because others did at the same moment (seen on an H100 with 14 shards). Each failure is
    # re-run alone, in one process after the shards; both results are reported, and only a
    # test that also fails alone fails the run.
    log_name = os.path.join(out, f"{tag}_rerun_alone.log")
    with open(log_name, "w") as log:
        rerun = subprocess.run(base + ["-q", "-rfE"] + failed_ids, stdout=log, stderr=subprocess.STDOUT)
    summary, failures = _read_log(log_name)
    print(f"{tag}: {len(failed_ids)} failed in the shards, re-run alone: {summary}", flush=True)
    for line in failures:
        print("   ", line[:300], flush=True)
    return 1 if crashed or rerun.returncode != 0 else 0


def _read_log(path: str) -> tuple[str, list[str]]:
    """A pytest log's last summary line and its FAILED / ERROR lines."""
    lines = open(path).read().splitlines()
    last = [line for line in lines if re.search(r"\d+ (passed|failed|error)", line)]
    failures = [line for line in lines if line.startswith(("FAILED ", "ERROR "))]
    return (last[-1] if last else "no summary (crashed?)"), failures


if __name__ == "__main__":
    sys.exit(main(sys.argv))
