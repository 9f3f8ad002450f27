"""Host cost pieces of the persistent split's launch (per call, us)."""
import os, time, contextlib
import torch, triton
import triton.language as tl
import flashtune
from flashtune.gen import load_variant, row_sync
from flashtune.gen.softmax_space import SoftmaxProblem, default_config
def per_call(fn, n=2000):
    for _ in range(20): fn()
    t0 = time.perf_counter()
    for _ in range(n): fn()
    return (time.perf_counter() - t0) / n * 1e6
dev = torch.device("cuda", 0)
x = torch.randn(16, 1048576, device="cuda", dtype=torch.float16); y = torch.empty_like(x)
m = load_variant("softmax", default_config("softmax", SoftmaxProblem(16, 1048576, "float16")))
m.launch(x, y); torch.cuda.synchronize()
def cm():
    with row_sync.polled_partials(dev, 1024) as ws:
        pass
res = {
  "torch.cuda.current_stream(dev)": per_call(lambda: torch.cuda.current_stream(dev)),
  "torch._C._cuda_getCurrentRawStream(0)": per_call(lambda: torch._C._cuda_getCurrentRawStream(0)),
  "is_current_stream_capturing()": per_call(torch.cuda.is_current_stream_capturing),
  "row_sync._stream_key": per_call(lambda: row_sync._stream_key(dev)),
  "x.device": per_call(lambda: x.device),
  "x.device.index": per_call(lambda: x.device.index),
  "one_launch": per_call(lambda: row_sync.one_launch(x, 64, persistent=True)),
  "polled_partials enter/exit": per_call(cm),
  "state.words[half]": per_call(lambda: next(iter(row_sync._PARTIALS.values())).words[0]),
  "x.stride(0)": per_call(lambda: x.stride(0)),
}
st = next(iter(row_sync._PARTIALS.values()))
k = m._softmax_split_persistent
args = (x, y, st.words[0], st.words[1], st.tickets, 1048576, 1048576, 1048576, 16384, 1024, 0, 528)
kw = dict(BLOCK=8192, SPLITS=64, MAX_POLLS=row_sync.MAX_POLLS, num_warps=8, num_stages=1)
# launching the kernel alone with zero-stale args is safe only if slots are zero: skip, time on a dummy kernel instead
@triton.jit
def dummy(a, b, c, d, e, n1, n2, n3, n4, n5, n6, n7, B: tl.constexpr, S: tl.constexpr, M: tl.constexpr):
    pass
import triton.language as tl
dummy[(528,)](*args, B=8192, S=64, M=65536, num_warps=8)
res["triton launch of an empty kernel, same 12 args"] = per_call(lambda: dummy[(528,)](*args, B=8192, S=64, M=65536, num_warps=8))
res["full launch()"] = per_call(lambda: m.launch(x, y), 300)
res["flashtune.softmax"] = per_call(lambda: flashtune.softmax(x), 300)
torch.cuda.synchronize()
for k_, v in res.items():
    print(f"{v:7.2f} us  {k_}")
