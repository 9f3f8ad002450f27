"""Run a pytest selection as N parallel shards (compile-bound GPU tests), logs under $OUT."""
import os, subprocess, sys, time, re

n = int(sys.argv[1]); tag = sys.argv[2]; args = sys.argv[3:]
out = os.environ.get("OUT", "/tmp")
col = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider", "-m", "gpu"] + args,
                     capture_output=True, text=True)
ids = [l.strip() for l in col.stdout.splitlines() if "::" in l]
print(f"{tag}: {len(ids)} tests in {n} shards", flush=True)
t0 = time.time()
procs = []
for i in range(n):
    part = ids[i::n]
    if not part:
        continue
    log = open(os.path.join(out, f"{tag}_shard{i}.log"), "w")
    procs.append((i, subprocess.Popen([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-m", "gpu", "-rfE"] + part,
                                      stdout=log, stderr=subprocess.STDOUT), log))
tot = {}
for i, p, log in procs:
    p.wait(); log.close()
    text = open(log.name).read()
    last = [l for l in text.splitlines() if re.search(r"\d+ (passed|failed|error)", l)]
    val = [l for l in text.splitlines() if "validated" in l]
    print(f"shard {i} rc={p.returncode}: {last[-1] if last else '?'} | {' ; '.join(val)}", flush=True)
    for l in text.splitlines():
        if l.startswith("FAILED") or l.startswith("ERROR"):
            print("   ", l[:300], flush=True)
    for k, v in re.findall(r"(\d+) (passed|failed|skipped|errors?)", last[-1] if last else ""):
        tot[v] = tot.get(v, 0) + int(k)
print(f"{tag}: total {tot} in {time.time() - t0:.0f}s", flush=True)
