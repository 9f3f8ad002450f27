import time, cProfile, pstats, torch, flashtune, io
q, k, v = (torch.randn(4, 32, 1000, 128, device="cuda", dtype=torch.bfloat16) for _ in range(3))
for _ in range(5):
    flashtune.attention(q, k, v, causal=True)
torch.cuda.synchronize()
for trial in range(3):
    t = time.perf_counter()
    for _ in range(100):
        flashtune.attention(q, k, v, causal=True)
    host = (time.perf_counter() - t) / 100 * 1e6
    torch.cuda.synchronize()
    print(f"trial {trial}: host {host:.1f} us/call", flush=True)
x = torch.randn(4096, 1000, device="cuda", dtype=torch.bfloat16)
torch.cuda.synchronize(); t = time.perf_counter()
for _ in range(100):
    flashtune.softmax(x, -1)
print(f"softmax host {(time.perf_counter() - t) / 100 * 1e6:.1f} us/call", flush=True)
pr = cProfile.Profile(); pr.enable()
for _ in range(100):
    flashtune.attention(q, k, v, causal=True)
pr.disable(); torch.cuda.synchronize()
s = io.StringIO(); pstats.Stats(pr, stream=s).sort_stats("tottime").print_stats(22); print(s.getvalue())
