"""Session 34: flashtune on the second GPU of a two-GPU machine (the current device stays
cuda:0, and the other way round): softmax / log_softmax forward and backward, the persistent
split's row sync (16 x 1048576), attention; every output on its input's device and checked
against float64 there. Prints one line per case and a summary."""
import torch

import flashtune


def check(name, got, want, atol):
    err = (got.double() - want).abs().max().item()
    ok = got.device == want.device and err <= atol
    print(f"{name:48s} device {got.device} err {err:.2e} {'ok' if ok else 'FAIL'}", flush=True)
    return ok


def softmax_cases(dev):
    results = []
    for rows, cols, dtype in ((4096, 1000, torch.float16), (16, 1048576, torch.float16),
                              (16, 1048576, torch.float32), (8, 50257, torch.bfloat16)):
        x = torch.randn(rows, cols, device=dev, dtype=dtype)
        ref = torch.softmax(x.double(), -1)
        tol = 4 * (torch.softmax(x, -1).double() - ref).abs().max().item() + 1e-6
        results.append(check(f"softmax {rows}x{cols} {dtype} on {dev}", flashtune.softmax(x), ref, tol))
        lref = torch.log_softmax(x.double(), -1)
        ltol = 4 * (torch.log_softmax(x, -1).double() - lref).abs().max().item() + 1e-5
        results.append(check(f"log_softmax {rows}x{cols} {dtype} on {dev}", flashtune.log_softmax(x),
                             lref, ltol))
    x = torch.randn(64, 3000, device=dev, requires_grad=True)
    g = torch.randn(64, 3000, device=dev)
    flashtune.softmax(x).backward(g)
    xd = x.detach().double().requires_grad_()
    torch.softmax(xd, -1).backward(g.double())
    results.append(check(f"softmax backward 64x3000 on {dev}", x.grad, xd.grad, 1e-6))
    return results


def attention_cases(dev):
    results = []
    for causal in (False, True):
        q, k, v = (torch.randn(2, 4, 1000, 64, device=dev, dtype=torch.float16) for _ in range(3))
        ref = torch.nn.functional.scaled_dot_product_attention(q.double(), k.double(), v.double(),
                                                               is_causal=causal)
        results.append(check(f"attention causal={causal} on {dev}",
                             flashtune.attention(q, k, v, causal=causal), ref, 4e-3))
    return results


def main():
    print(torch.cuda.device_count(), "GPUs:", [torch.cuda.get_device_name(i)
                                              for i in range(torch.cuda.device_count())])
    results = []
    print("current device", torch.cuda.current_device())
    results += softmax_cases("cuda:1") + attention_cases("cuda:1")
    results += softmax_cases("cuda:0") + attention_cases("cuda:0")
    torch.cuda.set_device(1)
    print("current device", torch.cuda.current_device())
    results += softmax_cases("cuda:0") + attention_cases("cuda:0")
    results += softmax_cases("cuda:1")
    torch.cuda.synchronize(0)
    torch.cuda.synchronize(1)
    print(f"{sum(results)}/{len(results)} cases ok")


if __name__ == "__main__":
    main()
