import re, sys, collections
def loops(path):
    ins = []
    for line in open(path):
        m = re.match(r"\s*/\*([0-9a-f]{4,})\*/\s+(.*?);", line)
        if m:
            ins.append((int(m.group(1), 16), m.group(2).strip()))
    addr = {a: i for i, (a, _) in enumerate(ins)}
    for i, (a, t) in enumerate(ins):
        m = re.search(r"BRA (0x[0-9a-f]+)", t)
        if m and int(m.group(1), 16) < a:
            s = addr.get(int(m.group(1), 16))
            if s is None: continue
            body = [x[1] for x in ins[s:i + 1]]
            ops = collections.Counter(b.split()[0] if not b.startswith("@") else b.split()[1] for b in body)
            ops = collections.Counter({k.split(".")[0]: 0 for k in ops}) + collections.Counter(k.split(".")[0] for b in body for k in [b.split()[1] if b.startswith("@") else b.split()[0]])
            print(f"loop {ins[s][0]:#x}-{a:#x}: {len(body)} instr; top:", ", ".join(f"{k} {v}" for k, v in ops.most_common(14)))
loops(sys.argv[1])
