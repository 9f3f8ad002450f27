"""Generate the cluster read-once softmax prototype with the held tile in K separate parts."""
import importlib.util, os, sys, jinja2

SRC = r'''
import triton, triton.language as tl

LOG2E = tl.constexpr(1.4426950408889634)


@triton.jit
def _cluster_barrier(tok):
    return tl.inline_asm_elementwise(
        "barrier.cluster.arrive.release.aligned;\nbarrier.cluster.wait.acquire.aligned;\nmov.u32 $0, $1;",
        "=r,r", [tok], dtype=tl.int32, is_pure=False, pack=1)


@triton.jit
def _after(x, tok):
    return tl.inline_asm_elementwise("mov.b32 $0, $1;", "=r,r,r,r", [x, tok],
                                     dtype=x.dtype, is_pure=False, pack=2)


@triton.jit
def kernel(X, Y, P, n_cols, stride_x, stride_y, C: tl.constexpr, T: tl.constexpr, SYNC: tl.constexpr):
    # tile [C, T]: dim 0 is split across the C CTAs of the cluster; T columns per CTA in K parts
    row = tl.program_id(0).to(tl.int64)
    c = tl.arange(0, C)[:, None]
    PART: tl.constexpr = T // {{ K }}
    xrow = X + row * stride_x
    yrow = Y + row * stride_y
{% for k in range(K) %}
    x{{k}} = tl.load(xrow + c * T + {{k}} * PART + tl.arange(0, PART)[None, :])
{% endfor %}
    # per-position statistics across the K parts (no cross-thread work until the end)
    mv = x0
{% for k in range(1, K) %}
    mv = tl.maximum(mv, x{{k}})
{% endfor %}
    mvf = mv.to(tl.float32)
    mvs = tl.where(mvf == -float("inf"), 0.0, mvf) * LOG2E
    dv = tl.exp2(x0.to(tl.float32) * LOG2E - mvs)
{% for k in range(1, K) %}
    dv += tl.exp2(x{{k}}.to(tl.float32) * LOG2E - mvs)
{% endfor %}
    m = tl.max(mvf, axis=1)
    ms = tl.where(m == -float("inf"), 0.0, m)[:, None] * LOG2E
    d = tl.sum(dv * tl.exp2(mvs - ms), axis=1)
    if SYNC:
        cc = tl.arange(0, C)
        base = P + row * (2 * C)
        tl.store(base + cc, m)
        tl.store(base + C + cc, d)
        tok = _cluster_barrier(tl.full([], 0, tl.int32))
        allm = tl.load(base + tok + tl.arange(0, C)[None, :] + c * 0, volatile=True)
        alld = tl.load(base + C + tok + tl.arange(0, C)[None, :] + c * 0, volatile=True)
        M = tl.max(allm, axis=1)
        Ms = tl.where(M == -float("inf"), 0.0, M)
        D = tl.sum(alld * tl.exp2((allm - Ms[:, None]) * LOG2E), axis=1)
        Ms = Ms[:, None] * LOG2E
        R = (1.0 / D)[:, None]
{% for k in range(K) %}
        x{{k}} = _after(x{{k}}, tok)
{% endfor %}
    else:
        Ms = ms
        R = (1.0 / d)[:, None]
{% for k in range(K) %}
    tl.store(yrow + c * T + {{k}} * PART + tl.arange(0, PART)[None, :],
             (tl.exp2(x{{k}}.to(tl.float32) * LOG2E - Ms) * R).to(Y.dtype.element_ty))
{% endfor %}
'''


def load(K, folder="/tmp/cluster_gen"):
    os.makedirs(folder, exist_ok=True)
    path = os.path.join(folder, f"cluster_k{K}.py")
    with open(path, "w") as f:
        f.write(jinja2.Template(SRC, undefined=jinja2.StrictUndefined).render(K=K))
    spec = importlib.util.spec_from_file_location(f"cluster_k{K}", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod.kernel
