"""Softmax/log_softmax backward: flashtune's kernel (default configs, or the tuned DB if
FLASHTUNE_DB is set) against torch's backward (aten._softmax_backward_data), same run, do_bench
medians with L2 flushed. Bytes = 3 x size (read y and dy, write dx). Also fwd+bwd through
autograd against torch.softmax. Correctness of each dx against float64 (accuracy rule)."""
import os, sys, torch, triton
from triton.testing import do_bench
import flashtune
import flashtune.dispatch.library  # noqa: F401
from flashtune.reference import check_accuracy, softmax_backward_ref, softmax_backward_scale, softmax_ref
aten = torch.ops.aten
print(torch.cuda.get_device_name(), torch.__version__, triton.__version__, "DB:", os.environ.get("FLASHTUNE_DB"))
shapes = [(65536, 128), (16384, 1024), (8192, 4096), (4096, 16384), (1024, 65536), (128, 262144),
          (16, 1048576), (4096, 50257)]
x0 = torch.empty(2**28, dtype=torch.float32, device="cuda")
src = torch.empty_like(x0).uniform_()
cp = do_bench(lambda: x0.copy_(src), warmup=25, rep=100, return_mode="median")
copy_gbs = 2 * x0.numel() * 4 / cp / 1e6
print(f"copy 1 GiB: {copy_gbs:.0f} GB/s")
del x0, src
rows = []
for log in (False, True):
    ours_op = torch.ops.flashtune.log_softmax_backward if log else torch.ops.flashtune.softmax_backward
    tfn = aten._log_softmax_backward_data if log else aten._softmax_backward_data
    for dt in (torch.float16, torch.bfloat16, torch.float32):
        for (r, c) in shapes:
            x = torch.randn(r, c, device="cuda", dtype=dt)
            y = (torch.log_softmax if log else torch.softmax)(x, -1)
            dy = torch.randn_like(y)
            dx = ours_op(y, dy, -1)
            ref = softmax_backward_ref(y, dy, -1, log)
            peer = tfn(dy, y, -1, dt)
            acc = check_accuracy(dx, ref, peer, scale=softmax_backward_scale(y, dy, -1, log))
            del ref
            t_ours = do_bench(lambda: ours_op(y, dy, -1), warmup=25, rep=100, return_mode="median")
            t_torch = do_bench(lambda: tfn(dy, y, -1, dt), warmup=25, rep=100, return_mode="median")
            # fwd + bwd through autograd
            xg = x.detach().requires_grad_(True)
            f_ours = flashtune.log_softmax if log else flashtune.softmax
            f_torch = torch.log_softmax if log else torch.softmax
            t_fb_ours = do_bench(lambda: f_ours(xg, -1).backward(dy), warmup=25, rep=100, return_mode="median", grad_to_none=[xg])
            t_fb_torch = do_bench(lambda: f_torch(xg, -1).backward(dy), warmup=25, rep=100, return_mode="median", grad_to_none=[xg])
            gbs = 3 * x.numel() * x.element_size() / t_ours / 1e6
            rows.append((("log_" if log else "") + "softmax_bwd", str(dt)[6:], f"{r}x{c}", t_ours * 1e3, t_torch * 1e3,
                         t_torch / t_ours, gbs / copy_gbs * 100, t_fb_torch / t_fb_ours, acc.ok))
            print(rows[-1], flush=True)
            del x, y, dy, dx, peer, xg
print(f"\n{'op':>19} {'dtype':>8} {'shape':>11} {'ours us':>8} {'torch us':>9} {'x torch':>7} {'% copy':>6} {'fwd+bwd x torch':>15} ok")
for op, dt, s, a, b, sp, pc, fb, ok in rows:
    print(f"{op:>19} {dt:>8} {s:>11} {a:8.1f} {b:9.1f} {sp:7.2f} {pc:6.1f} {fb:15.2f} {ok}")
print("slower than torch (bwd):", [(op, dt, s, round(sp, 2)) for op, dt, s, a, b, sp, pc, fb, ok in rows if sp < 1.0])
print("slower than torch (fwd+bwd):", [(op, dt, s, round(fb, 2)) for op, dt, s, a, b, sp, pc, fb, ok in rows if fb < 1.0])
print("accuracy failures:", [(op, dt, s) for op, dt, s, *_, ok in rows if not ok])
