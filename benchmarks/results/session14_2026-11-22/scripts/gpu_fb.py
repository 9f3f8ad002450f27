"""Why is forward + backward through autograd slower than the two kernels? 4096x16384 fp16:
do_bench of each piece, and the kernels of one step from torch.profiler."""
import torch
from triton.testing import do_bench
from torch.profiler import profile, ProfilerActivity
import flashtune
import flashtune.dispatch.library  # noqa: F401
print(torch.cuda.get_device_name(), torch.__version__)
for shape in [(4096, 16384), (8192, 4096)]:
    x = torch.randn(*shape, device="cuda", dtype=torch.float16)
    dy = torch.randn_like(x)
    xg = x.detach().requires_grad_(True)
    y = torch.softmax(x, -1)
    def step(f):
        def run():
            f(xg, -1).backward(dy)
        return run
    cases = {
        "ours fwd inference": lambda: flashtune.softmax(x, -1),
        "torch fwd inference": lambda: torch.softmax(x, -1),
        "ours fwd requires_grad": lambda: flashtune.softmax(xg, -1),
        "torch fwd requires_grad": lambda: torch.softmax(xg, -1),
        "ours bwd op": lambda: torch.ops.flashtune.softmax_backward(y, dy, -1),
        "torch bwd": lambda: torch.ops.aten._softmax_backward_data(dy, y, -1, x.dtype),
        "ours fwd+bwd": step(flashtune.softmax),
        "torch fwd+bwd": step(torch.softmax),
    }
    for k, f in cases.items():
        gtn = [xg] if "bwd" in k and "+" in k else None
        print(shape, f"{k:28s} {do_bench(f, warmup=25, rep=100, return_mode='median', grad_to_none=gtn)*1e3:8.1f} us", flush=True)
    for name, f in (("ours", step(flashtune.softmax)), ("torch", step(torch.softmax))):
        for _ in range(3):
            xg.grad = None; f()
        torch.cuda.synchronize()
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            for _ in range(5):
                xg.grad = None; f()
            torch.cuda.synchronize()
        print(name, shape)
        print(prof.key_averages().table(sort_by="cuda_time_total", row_limit=8, max_name_column_width=70))
