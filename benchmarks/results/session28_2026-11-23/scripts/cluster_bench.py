"""Prototype bench: read-once long-row softmax on Hopper thread-block clusters (cluster_gen.py).

One program = one row = one cluster of C CTAs (Triton num_ctas=C). The [C, T] tile is split
along dim 0 across the cluster, so each CTA holds T columns in registers; partial (m, d) go
through global memory around a hardware cluster barrier. x is read once, y written once.

Timing as session 27's tile_wait.py: triton.testing.do_bench median (L2 flushed), against a
1 GiB copy, a same-size copy_, the product (flashtune.softmax) and torch.softmax.
Env: OUT, CONFIGS "rows:cols:dtype:C:warps:K:maxnreg:sync,...".
"""
import os
import sys

import torch
import triton

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cluster_gen import load  # noqa: E402


def main():
    out = os.environ.get("OUT", ".")
    log = open(os.path.join(out, "cluster_bench.log"), "a")

    def say(s):
        print(s, flush=True)
        log.write(s + "\n")

    def bench(fn):
        return triton.testing.do_bench(fn, warmup=25, rep=100, return_mode="median") * 1e3

    import flashtune
    say(f"{torch.cuda.get_device_name()} torch {torch.__version__} triton {triton.__version__}")
    big = torch.empty(1 << 30, dtype=torch.uint8, device="cuda")
    big2 = torch.empty_like(big)
    copy_rate = (2 << 30) / (bench(lambda: big2.copy_(big)) * 1e-6) / 1e9
    say(f"1 GiB copy: {copy_rate:.0f} GB/s")
    del big, big2
    configs = [c.split(":") for c in os.environ["CONFIGS"].split(",")]
    table = []
    done_peers = set()
    for rows, cols, dname, C, W, K, R, S in configs:
        rows, cols, C, W, K, R, S = map(int, (rows, cols, C, W, K, R, S))
        dtype = getattr(torch, dname)
        name = f"{rows}x{cols} {dname}"
        torch.manual_seed(0)
        x = torch.randn(rows, cols, device="cuda").to(dtype)
        ref = torch.softmax(x.double(), -1)
        nbytes = 2 * x.numel() * x.element_size()
        pct = lambda us: 100 * nbytes / (us * 1e-6) / 1e9 / copy_rate  # noqa: E731
        if name not in done_peers:
            done_peers.add(name)
            y = torch.empty_like(x)
            t_copy = bench(lambda: y.copy_(x))
            flashtune.softmax(x)
            t_prod = bench(lambda: flashtune.softmax(x))
            t_torch = bench(lambda: torch.softmax(x, -1))
            e_prod = (flashtune.softmax(x).double() - ref).abs().max().item()
            e_torch = (torch.softmax(x, -1).double() - ref).abs().max().item()
            say(f"{name}: copy_ {t_copy:.1f} us ({pct(t_copy):.0f}%), product {t_prod:.1f} "
                f"({pct(t_prod):.0f}%) err {e_prod:.1e}, torch {t_torch:.1f} err {e_torch:.1e}; "
                f"80% line {nbytes / (0.8 * copy_rate * 1e3):.1f} us")
            table += [(name, "copy_", t_copy, pct(t_copy), 0.0), (name, "product", t_prod, pct(t_prod), e_prod)]
        T = cols // C
        assert T * C == cols and T & (T - 1) == 0, "prototype: cols = C x power of two"
        kern = load(K)
        y = torch.empty_like(x)
        P = torch.empty(rows * 2 * C, device="cuda", dtype=torch.float32)
        opts = dict(num_warps=W, num_ctas=C)
        if R:
            opts["maxnreg"] = R
        tag = f"C{C} w{W} K{K} r{R} sync{S}"
        try:
            def run():
                return kern[(rows,)](x, y, P, cols, x.stride(0), y.stride(0), C=C, T=T, SYNC=S, **opts)
            compiled = run()
            torch.cuda.synchronize()
            err = (y.double() - ref).abs().max().item()
            t = bench(run)
            err = max(err, (y.double() - ref).abs().max().item())
        except Exception as e:  # noqa: BLE001
            say(f"  {tag}: {type(e).__name__}: {str(e)[:400]}")
            continue
        info = ""
        try:
            for v in [compiled]:
                info = f"regs {v.n_regs} spills {v.n_spills}"
                if C > 1:
                    try:
                        occ = triton.runtime.driver.active.utils.cuOccupancyMaxActiveClusters(
                            v.function, v.metadata.shared, C)
                        info += f" max_active_clusters {occ}"
                    except Exception as e:  # noqa: BLE001
                        info += f" (max_active_clusters: {type(e).__name__}: {str(e)[:80]})"
                if "dump" not in done_peers:
                    done_peers.add("dump")
                    open(os.path.join(out, "first.ttgir"), "w").write(v.asm["ttgir"])
        except Exception as e:  # noqa: BLE001
            info = f"(no info: {type(e).__name__})"
        say(f"  {tag}: {t:.1f} us ({pct(t):.0f}%) err {err:.1e} {info}")
        table.append((name, tag, t, pct(t), err))
    say("\n| shape | kernel | us | % copy | max err |\n|---|---|---|---|---|")
    for name, k, t, p, e in table:
        say(f"| {name} | {k} | {t:.1f} | {p:.0f}% | {e:.1e} |")


if __name__ == "__main__":
    main()
