"""flashtune.attention on inputs no other test names: causal alignment against torch's own
lower-right bias, odd head dims, stride tricks, NaN/inf, extreme scales, non-strided tensors,
autograd in both modes, torch.compile, vmap and a tuned config kept on an input error.
Runs on CPU in Triton's interpreter (fp16 unless the kernel upcasts bf16)."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import torch
import torch.autograd.forward_ad as fwAD
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel
from torch.nn.attention.bias import causal_lower_right

import flashtune
from flashtune.gen import loader
from attention_cases import Shape, check_case, config, lse_error, make_qkv
from dispatch_helpers import DEVICE, fresh_db, seed_attention  # noqa: F401
from flashtune import dispatch
from flashtune.gen import attention_ops
from flashtune.gen.attention_space import PV_ACC, AttentionProblem
from flashtune.reference import attention_ref

pytestmark = [pytest.mark.filterwarnings("ignore::RuntimeWarning:triton"),
              pytest.mark.filterwarnings("ignore::flashtune.cache.CacheWarning"),
              pytest.mark.filterwarnings("ignore:Lower right causal bias:UserWarning")]


def _qkv(device, nq=9, nk=13, d=16, h=2, hkv=2, b=1, dtype=torch.float16, layout="bhnd"):
    return make_qkv(Shape(b, h, hkv, nq, nk, d, layout), dtype, device)


def _sdpa32(q, k, v, **kw):
    """torch's math SDPA in float32 (its own masks, GQA expanded by hand)."""
    group = q.shape[1] // k.shape[1]
    k, v = (t.repeat_interleave(group, 1) for t in (k, v))
    with sdpa_kernel(SDPBackend.MATH):
        return F.scaled_dot_product_attention(q.float(), k.float(), v.float(), **kw)


# --- causal alignment: what the docstring promises, checked against torch's own masks ----------

@pytest.mark.parametrize("nq,nk", [(5, 23), (23, 5), (1, 17), (17, 1), (12, 12)])
def test_causal_is_torch_lower_right(device, nq, nk):
    q, k, v = _qkv(device, nq=nq, nk=nk)
    out, lse = flashtune.attention(q, k, v, causal=True, return_lse=True)
    assert check_case(out, lse, q, k, v, True) is None
    # Older torch versions give NaN (newer: 0) for rows that see no key: ours are 0.
    ref = _sdpa32(q, k, v, attn_mask=causal_lower_right(nq, nk)).nan_to_num(nan=0.0)
    torch.testing.assert_close(out.float(), ref, atol=2e-3, rtol=2e-3)
    top_left = _sdpa32(q, k, v, is_causal=True)
    if nq == nk:  # both alignments agree on square problems
        torch.testing.assert_close(out.float(), top_left, atol=2e-3, rtol=2e-3)
    elif nq < nk:  # the documented difference from SDPA's is_causal=True
        assert not torch.allclose(out.float(), top_left, atol=1e-2)


def test_rows_that_see_no_key_are_zero_with_lse_minus_inf(device):
    q, k, v = _qkv(device, nq=11, nk=4)  # causal: the first 7 query rows see no key
    out, lse = flashtune.attention(q, k, v, causal=True, return_lse=True)
    assert not out[:, :, :7].any() and torch.isneginf(lse[:, :, :7]).all()
    assert torch.isfinite(lse[:, :, 7:]).all() and out[:, :, 7:].abs().sum() > 0
    ref = _sdpa32(q, k, v, attn_mask=causal_lower_right(11, 4)).nan_to_num(nan=0.0)
    torch.testing.assert_close(out.float(), ref, atol=2e-3, rtol=2e-3)


# --- shapes --------------------------------------------------------------------------------------

@pytest.mark.parametrize("d", [8, 24, 48, 80, 192, 256])
def test_supported_head_dims(device, d):
    q, k, v = _qkv(device, nq=7, nk=11, d=d, h=1, hkv=1)
    out, lse = flashtune.attention(q, k, v, causal=True, return_lse=True)
    assert check_case(out, lse, q, k, v, True) is None


@pytest.mark.parametrize("d", [1, 4, 33, 100, 264, 512])
def test_unsupported_head_dims_are_value_errors(device, d):
    q, k, v = _qkv(device, nq=3, nk=3, d=d, h=1, hkv=1)
    with pytest.raises(ValueError, match=f"head dim {d} .*multiple of 8 between 8 and 256"):
        flashtune.attention(q, k, v)


def test_gqa_and_mqa_match_expanded_heads(device):
    for h, hkv in ((6, 2), (4, 1)):
        q, k, v = _qkv(device, h=h, hkv=hkv, b=2)
        out = flashtune.attention(q, k, v, causal=True)
        torch.testing.assert_close(out.float(), _sdpa32(q, k, v, attn_mask=causal_lower_right(9, 13)),
                                   atol=2e-3, rtol=2e-3)
    q, k, v = _qkv(device, h=2, hkv=4)
    with pytest.raises(ValueError, match="not a multiple"):
        flashtune.attention(q, k, v)


@pytest.mark.parametrize("b, nk", [(0, 8), (1, 0)])
def test_empty_cpu_problem_outside_the_interpreter_is_refused_as_any(monkeypatch, b, nk):
    """README: attention of CPU tensors raises ValueError outside the interpreter. An empty
    batch (or no keys) returned zeros there, so a model's empty first batch passed and its
    next one was refused."""
    monkeypatch.setattr(loader, "interpreter_mode", lambda: False)
    q = torch.randn(b, 2, 8, 16, dtype=torch.float16)
    kv = torch.randn(b, 2, nk, 16, dtype=torch.float16)
    with pytest.raises(ValueError, match="q is on cpu"):
        flashtune.attention(q, kv, kv)


def test_empty_combinations(device):
    q, k, v = _qkv(device, h=0, hkv=2)
    assert flashtune.attention(q, k, v).shape == (1, 0, 9, 16)
    q, k, v = _qkv(device, b=0)
    out, lse = flashtune.attention(q, k, v, causal=True, return_lse=True)
    assert out.shape == (0, 2, 9, 16) and lse.shape == (0, 2, 9)
    q, k, v = _qkv(device, nq=0, nk=0)
    out, lse = flashtune.attention(q, k, v, causal=True, return_lse=True)
    assert out.shape == (1, 2, 0, 16) and lse.shape == (1, 2, 0)
    q, k, v = _qkv(device, nk=0)
    out, lse = flashtune.attention(q, k, v, causal=True, return_lse=True)
    assert not out.any() and torch.isneginf(lse).all()


# --- strides ---------------------------------------------------------------------------------------

def test_stride_tricks(device):
    q, k, v = _qkv(device, d=32)
    wide = torch.randn(1, 2, 9, 48, dtype=torch.float16, device=device)
    flat = torch.randn(4000, dtype=torch.float16, device=device)
    cases = {
        "sliced head dim": (wide[..., 8:40], k, v),
        "kv heads expanded (stride 0)": (torch.randn(1, 4, 9, 32, dtype=torch.float16, device=device),
                                         k[:, :1].expand(1, 4, 13, 32), v[:, :1].expand(1, 4, 13, 32)),
        "keys expanded (stride 0)": (q, k[:, :, :1].expand(1, 2, 13, 32), v),
        "queries expanded (stride 0)": (q[:, :, :1].expand(1, 2, 9, 32), k, v),
        "odd storage offsets": (flat[3:3 + 576].view(1, 2, 9, 32), flat[1001:1001 + 832].view(1, 2, 13, 32),
                                flat[2999:2999 + 832].view(1, 2, 13, 32)),
        "head dim not innermost": (torch.randn(1, 2, 32, 9, dtype=torch.float16, device=device)
                                   .transpose(2, 3), k, v),
    }
    for name, (qq, kk, vv) in cases.items():
        out, lse = flashtune.attention(qq, kk, vv, causal=True, return_lse=True)
        assert check_case(out, lse, qq, kk, vv, True) is None, name
        assert out.shape == qq.shape, name
    bnhd = _qkv(device, layout="bnhd")
    out = flashtune.attention(*bnhd)
    assert out.stride() == bnhd[0].stride()  # the (B, N, H, D) layout is kept


# --- values ----------------------------------------------------------------------------------------

@pytest.mark.parametrize("where", ["q", "k", "v"])
@pytest.mark.parametrize("value", [float("nan"), float("inf"), float("-inf")])
def test_non_finite_inputs_like_torch_math(device, where, value):
    q, k, v = _qkv(device)
    t = {"q": q, "k": k, "v": v}[where]
    # Key 4 is seen by every query, causal too: a NaN in v at a causally masked key reaches
    # all rows in torch's math path (0 * NaN) but only the rows of its key tile here.
    t[0, 1, 4, 3] = value
    for causal in (False, True):
        out = flashtune.attention(q, k, v, causal=causal)
        mask = causal_lower_right(9, 13) if causal else None
        ref = _sdpa32(q, k, v, attn_mask=mask)
        assert torch.equal(out.isnan(), ref.isnan()), (where, value, causal)
        assert torch.equal(out.isinf(), ref.isinf()), (where, value, causal)
        fin = torch.isfinite(ref)
        torch.testing.assert_close(out.float()[fin], ref[fin], atol=2e-3, rtol=2e-3)


def test_float64_oracles_keep_nan_from_inputs_like_sdpa(device):
    """The oracles zero the rows that see no key (softmax of all -inf is NaN there), and only
    those: they used to zero every NaN probability, so a NaN or +inf input gave an output of 0
    where SDPA gives NaN, and the accuracy rule failed the kernel for matching torch."""
    from flashtune.bench.checks import attention_oracle

    q, k, v = _qkv(device, nq=11, nk=4)  # causal: the first 7 query rows see no key
    q[0, 0, 9, 2] = float("nan")
    k[0, 1, 0, 0] = float("inf")  # +inf scores (NaN rows) or -inf ones (the key drops out)
    for causal in (False, True):
        ref, _ = attention_ref(q, k, v, causal)
        mask = causal_lower_right(11, 4) if causal else None
        sdpa = _sdpa32(q.double(), k.double(), v.double(), attn_mask=mask)
        if causal:
            assert not ref[:, :, :7].any()  # rows that see no key: 0 (older torch: NaN)
            sdpa[:, :, :7] = 0
        assert ref.isnan().any() and torch.equal(ref.isnan(), sdpa.isnan()), causal
        fin = torch.isfinite(sdpa)
        torch.testing.assert_close(ref.float()[fin], sdpa[fin], atol=1e-5, rtol=1e-5)
        out = flashtune.attention(q, k, v, causal=causal)
        assert torch.equal(out.isnan(), ref.isnan()), causal
        assert check_case(out, None, q, k, v, causal) is None, causal
        rows = torch.arange(11, device=device)
        for b, h in ((0, 0), (0, 1)):
            sampled = attention_oracle(q, k, v, causal, [(b, h)], rows)[0]
            assert torch.equal(sampled.isnan(), ref[b, h].isnan()), (causal, b, h)


def test_the_benchmark_oracle_reads_each_heads_own_kv_head_under_gqa(device):
    """The benchmark's float64 oracle indexed k and v by the query head, so with fewer kv
    heads than query heads it checked against the wrong head (or failed to index)."""
    from flashtune.bench.checks import attention_oracle

    q, k, v = _qkv(device, nq=10, nk=12, h=6, hkv=2, b=2)
    rows = torch.arange(10, device=device)
    for causal in (False, True):
        ref, _ = attention_ref(q, k, v, causal)
        pairs = [(0, 0), (0, 4), (1, 3), (1, 5)]
        sampled = attention_oracle(q, k, v, causal, pairs, rows)
        for i, (b, h) in enumerate(pairs):
            torch.testing.assert_close(sampled[i], ref[b, h].double(), atol=1e-6, rtol=1e-6)


@pytest.mark.parametrize("persistent", [False, True])
def test_a_whole_key_tile_of_minus_inf_scores_is_ignored_like_torch(device, persistent):
    """Keys whose scores are all -inf (k = -inf, q > 0) drop out of the softmax in torch; a
    full, unmasked key tile of them used to make exp(-inf - -inf) = NaN for the whole row."""
    gen = torch.Generator().manual_seed(1)
    q = (torch.rand(1, 2, 20, 16, generator=gen) + 0.1).to(device, torch.float16)
    k, v = (torch.randn(1, 2, 40, 16, generator=gen).to(device, torch.float16) for _ in range(2))
    k[:, :, :16] = float("-inf")
    for causal in (False, True):
        out = attention_ops.attention_forward(
            q, k, v, causal, config=config(BLOCK_M=16, BLOCK_N=16, persistent=persistent))
        ref = _sdpa32(q, k, v, attn_mask=causal_lower_right(20, 40) if causal else None)
        assert torch.isfinite(ref).all()
        torch.testing.assert_close(out.float(), ref, atol=2e-3, rtol=2e-3)


# Every code path of the key loops' running max: exp / exp2, both grids, tensor descriptors
# (emulated by the interpreter where this Triton has them).
_INF_PATHS = {"base": {}, "exp": {"exp2": False}, "persistent": {"persistent": True},
              "tma": {"tma": True}}


@pytest.mark.parametrize("knobs", list(_INF_PATHS.values()), ids=list(_INF_PATHS))
def test_a_plus_inf_score_gives_lse_plus_inf(device, knobs):
    """A query row with a +inf score (an inf in q or k) has logsumexp +inf, as the float64
    oracle (torch.logsumexp) says; its output is NaN, as in torch SDPA. The kernels returned
    LSE NaN there: exp(inf - inf) = NaN went into the running sum. A row that also has a NaN
    score keeps LSE NaN, a row whose scores are all -inf or that sees no key keeps -inf."""
    if knobs.get("tma") and "tma" not in attention_ops.triton_features():
        pytest.skip("this Triton has no tensor descriptors")
    _check_plus_inf_rows(device, config(BLOCK_M=16, BLOCK_N=16, **knobs))


def _check_plus_inf_rows(device, cfg):
    inf, nan = float("inf"), float("nan")
    gen = torch.Generator().manual_seed(3)
    q = (torch.rand(1, 4, 40, 16, generator=gen) + 0.1).to(device, torch.float16)  # q > 0
    k, v = (torch.randn(1, 4, 56, 16, generator=gen).to(device, torch.float16) for _ in range(2))
    # With 16 x 16 tiles:
    k[0, 0, 5] = inf   # in the first key tile: unmasked loop, seen by every row (causal too)
    k[0, 1, 50] = inf  # in the ragged last tile, after finite tiles (masked loop)
    k[0, 2, 20] = inf
    k[0, 2, 30, 0] = nan  # a NaN score after the +inf one: LSE NaN where key 30 is seen
    k[0, 3] = -inf  # every score -inf: the key drops out, the row sees none (out 0, LSE -inf)
    for causal in (False, True):
        # scale < 0 takes the unfolded unmasked loop: the -inf scores of head 3 become +inf
        for scale in (None, -0.25):
            out, lse = attention_ops.attention_forward(q, k, v, causal, scale, True, config=cfg)
            assert check_case(out, lse, q, k, v, causal, scale) is None, (causal, scale)
        out, lse = attention_ops.attention_forward(q, k, v, causal, None, True, config=cfg)
        lse = lse.cpu()
        out = out.cpu()
        seen = torch.arange(40) + 16 >= 50 if causal else True  # key 50 seen (bottom-right)
        assert torch.isposinf(lse[0, 0]).all() and out[0, 0].isnan().all()
        assert torch.equal(torch.isposinf(lse[0, 1]), torch.ones(40, dtype=torch.bool) & seen)
        assert out[0, 1].isnan().all(1).equal(torch.isposinf(lse[0, 1]))
        assert lse[0, 2, -1].isnan() and torch.isposinf(lse[0, 2, 4]) == causal
        assert torch.isneginf(lse[0, 3]).all() and not out[0, 3].any()
    # causal with Nq > Nk: the first 16 rows see no key (LSE -inf, out 0), the others see key 0
    q2 = q[:, :1]
    k2, v2 = k[:, :1, :24].clone(), v[:, :1, :24]
    k2[0, 0, 0] = inf
    out, lse = attention_ops.attention_forward(q2, k2, v2, True, None, True, config=cfg)
    assert check_case(out, lse, q2, k2, v2, True) is None
    assert torch.isneginf(lse[0, 0, :16]).all() and not out[0, 0, :16].any()
    assert torch.isposinf(lse[0, 0, 16:]).all() and out[0, 0, 16:].isnan().all()


def test_lse_of_two_key_halves_merges_to_the_whole_rows_lse(device):
    """Split-KV use of the LSE: the outputs over two halves of the keys merge (logaddexp, then
    out_i * exp(lse_i - lse)) into the whole row's result. A half with a +inf score has LSE
    +inf, which merges with a finite one to +inf; it used to be NaN, and the merge with it."""
    inf = float("inf")
    q, k, v = _qkv(device, nq=20, nk=64, h=3, hkv=3)
    q = q.abs() + 0.1
    k[0, 0, 3] = inf   # the first half only
    k[0, 1, 40] = inf  # the second half only
    whole, lse = flashtune.attention(q, k, v, return_lse=True)
    (out_a, lse_a), (out_b, lse_b) = (
        flashtune.attention(q, k[:, :, keys], v[:, :, keys], return_lse=True)
        for keys in (slice(0, 32), slice(32, 64)))
    merged_lse = torch.logaddexp(lse_a, lse_b)
    assert torch.isposinf(merged_lse[0, :2]).all() and torch.isfinite(merged_lse[0, 2]).all()
    assert torch.equal(merged_lse.isposinf(), lse.isposinf())
    torch.testing.assert_close(merged_lse[0, 2], lse[0, 2])
    merged = (out_a.float() * torch.exp(lse_a - merged_lse)[..., None]
              + out_b.float() * torch.exp(lse_b - merged_lse)[..., None])
    assert merged[0, :2].isnan().all() and whole[0, :2].isnan().all()
    torch.testing.assert_close(merged[0, 2], whole[0, 2].float(), atol=2e-3, rtol=2e-3)


def test_scales(device):
    q, k, v = _qkv(device)
    for scale in (0.0, -0.7, 3, np.float32(0.25), 1e-30):
        out, lse = flashtune.attention(q, k, v, causal=True, scale=scale, return_lse=True)
        assert check_case(out, lse, q, k, v, True, float(scale)) is None, scale
    out = flashtune.attention(q, k, v, scale=0)  # scale 0: the plain mean of v
    torch.testing.assert_close(out.float(), v.float().mean(2, keepdim=True).expand_as(out),
                               atol=2e-3, rtol=2e-3)
    for huge in (1e300, -1e39, 10**400):  # past float32: every score would be inf / NaN
        with pytest.raises(ValueError, match="scale must be finite"):
            flashtune.attention(q, k, v, scale=huge)


def test_zero_dim_tensor_scale_as_sdpa(device):
    """SDPA takes a 0-d real tensor as its scale (its value, float()); it was refused here."""
    q, k, v = _qkv(device)
    for scale in (torch.tensor(0.5), torch.tensor(0.25, dtype=torch.float64),
                  torch.tensor(2, dtype=torch.int32), torch.tensor(-0.7, dtype=torch.bfloat16)):
        out, lse = flashtune.attention(q, k, v, causal=True, scale=scale, return_lse=True)
        assert check_case(out, lse, q, k, v, True, float(scale)) is None, scale
    # the float scale's checks apply to the tensor's value
    for bad in (torch.tensor(float("nan")), torch.tensor(float("inf")), torch.tensor(1e300)):
        with pytest.raises(ValueError, match="scale must be finite"):
            flashtune.attention(q, k, v, scale=bad)
    # not a real number: refused as SDPA does (or as our bool scale is)
    for bad, what in ((torch.tensor([0.5]), "1-d"), (torch.ones(1, 1), "2-d"),
                      (torch.tensor(True), "torch.bool"), (torch.tensor(1 + 1j), "complex"),
                      (torch.tensor(0.5, requires_grad=True), "requires grad")):
        with pytest.raises(TypeError, match=f"scale must be .*{what}"):
            flashtune.attention(q, k, v, scale=bad)


def test_meta_tensor_scale_is_a_type_error_naming_scale(device):
    """A 0-d meta tensor (a model's scale buffer built on the meta device, for shape inference)
    holds no value: it was float()-ed and raised torch's RuntimeError "Tensor.item() cannot be
    called on meta tensors", which names no argument."""
    scale = torch.tensor(0.5, device="meta")
    for q, k, v in (_qkv(device), tuple(t.to("meta") for t in _qkv(device))):
        with pytest.raises(TypeError, match="scale must be .*meta tensor"):
            flashtune.attention(q, k, v, scale=scale)


@pytest.mark.parametrize("persistent", (False, True))
def test_scales_on_unmasked_key_tiles(device, persistent):
    """Scales that are not > 0 take the unfolded path of the unmasked key loop (max of the
    scaled scores, not scale x max); positive ones fold the scale into the exponent. Lengths of
    several 16-key tiles, so most tiles are unmasked, causal or not. Scores of a few hundred
    overflow exp unless the subtracted row max is the true one."""
    q, k, v = _qkv(device, nq=48, nk=64)
    q = q * 20
    for scale in (0.0, -0.7, -1e-30, 0.3):
        for causal in (False, True):
            out, lse = attention_ops.attention_forward(
                q, k, v, causal, scale, True,
                config=config(BLOCK_M=16, BLOCK_N=16, persistent=persistent))
            assert check_case(out, lse, q, k, v, causal, scale) is None, (scale, causal)


def test_huge_logits_stay_finite(device):
    q, k, v = _qkv(device, d=32)
    q = q * 1000  # scores ~ 1e4: exp overflows unless the running max is subtracted
    out, lse = flashtune.attention(q, k, v, causal=True, return_lse=True)
    assert torch.isfinite(out).all() and torch.isfinite(lse).all()
    assert check_case(out, lse, q, k, v, True) is None


@pytest.mark.parametrize("knobs", [dict(), dict(persistent=True), dict(exp2=False)],
                         ids=["plain", "persistent", "exp"])
def test_huge_fp16_scores_match_float64(device, knobs):
    """fp16 q and k near 8000 give scores of 2**29 (exp2 units). Compiled, the unmasked key
    loop's FMA-folded scale left the max key's exponent off by up to 16 there, and its p
    overflowed fp16: NaN rows where every SDPA backend is exact. Such tiles now run the key
    loop again with unfused scaling. Rows of ordinary scores share the tiles (rows 0-7) and
    must come out right too; ragged and causal lengths run both key loops, twice."""
    gen = torch.Generator().manual_seed(3)
    shape = (1, 2, 40, 64)
    q = (torch.rand(shape, generator=gen) * 4000 + 5000).half().to(device)
    k = (torch.rand(1, 2, 72, 64, generator=gen) * 4000 + 5000).half().to(device)
    v = torch.randn(1, 2, 72, 64, generator=gen).half().to(device)
    q[:, :, :8] = torch.randn(1, 2, 8, 64, generator=gen).half().to(device)
    cfg = config(BLOCK_M=16, BLOCK_N=16, **knobs)
    for causal in (False, True):
        out, lse = attention_ops.attention_forward(q, k, v, causal, None, True, config=cfg)
        ref, ref_lse = attention_ref(q, k, v, causal)
        assert torch.isfinite(out).all(), causal
        torch.testing.assert_close(out.double(), ref.to(out.device), atol=2e-3, rtol=0)
        ok, err, bound = lse_error(lse, ref_lse)
        assert ok, (causal, err, bound)


@pytest.mark.parametrize("pv_acc", PV_ACC)
@pytest.mark.parametrize("exp2", (True, False))
@pytest.mark.parametrize("block_n", (16, 64))
def test_pv_accumulator_does_not_overflow(device, block_n, exp2, pv_acc):
    """Every P.V accumulator of the space sums a key tile's products without overflowing: the
    former pv_acc='fp16' summed them in fp16, with p up to 1 per key, and BLOCK_N keys of
    |v| > 65504 / BLOCK_N overflowed to inf (equal scores, v = 5000: 16 x 5000 = 80000),
    although the output, a weighted mean of v, is finite; the LSE must not see any p scaling."""
    q = torch.zeros(1, 2, 16, 16, dtype=torch.float16, device=device)  # equal scores
    k = torch.randn(1, 2, 64, 16, dtype=torch.float16, device=device)
    v = torch.full((1, 2, 64, 16), 5000.0, dtype=torch.float16, device=device)
    cfg = config(BLOCK_M=16, BLOCK_N=block_n, pv_acc=pv_acc, exp2=exp2)
    for causal in (False, True):
        out = attention_ops.attention_forward(q, k, v, causal, config=cfg)
        torch.testing.assert_close(out, v[:, :, :16], atol=0, rtol=2e-3)
    # large random values: the accuracy rule against the float64 oracle, as for any variant,
    # with the LSE; Nq > Nk with causal leaves rows that see no key (out 0, LSE -inf)
    for nq, nk in ((16, 64), (40, 24)):
        q, k, v = _qkv(device, nq=nq, nk=nk)
        v = v * 3000
        for causal in (False, True):
            out, lse = attention_ops.attention_forward(q, k, v, causal, return_lse=True, config=cfg)
            assert check_case(out, lse, q, k, v, causal) is None, (nq, nk, causal)


@pytest.mark.parametrize("exp2", (True, False))
@pytest.mark.parametrize("block_n", (16, 64))
def test_pv_accumulator_does_not_overflow_at_huge_scores(device, block_n, exp2):
    """The former pv_acc='fp16' took p against (row max + log BLOCK_N) to keep the fp16 tile
    sum within max|v|; with scores of 2**28 that add rounds away in fp32 (its ulp is 32
    there), p came out 1 per key again and 16 keys of v = 5000 overflowed to inf. fp16 inputs
    reach such scores (q = k = 8192, head dim 16); the output, the mean of v, is finite, so
    every accumulator the tuner may pick must get it (and its LSE)."""
    q = torch.full((1, 1, 16, 16), 8192.0, dtype=torch.float16, device=device)
    k = torch.full((1, 1, 64, 16), 8192.0, dtype=torch.float16, device=device)
    v = torch.full((1, 1, 64, 16), 5000.0, dtype=torch.float16, device=device)
    scale = 0.25  # scores 16 * 8192**2 / 4 = 2**28
    for pv_acc in PV_ACC:
        cfg = config(BLOCK_M=16, BLOCK_N=block_n, pv_acc=pv_acc, exp2=exp2)
        out, lse = attention_ops.attention_forward(q, k, v, False, scale, True, config=cfg)
        torch.testing.assert_close(out, v[:, :, :16], atol=0, rtol=2e-3, msg=pv_acc)
        expected = torch.full_like(lse, 2.0**28 + np.log(64))
        torch.testing.assert_close(lse, expected, atol=64, rtol=0, msg=pv_acc)


@pytest.mark.parametrize("exp2", (True, False))
def test_peaked_attention_keeps_the_small_weights(device, exp2):
    """Attention with a "sink": one key scores g = 14 above the others (all equal), and its
    value is 0 (as LLMs' sink tokens often are), so the output is the small weights' mean of
    the other values. pv_acc='fp16' (taken out of the space for this) multiplied p by
    1 / BLOCK_N before its fp16 tile product: exp(-14) / 64 is below fp16's smallest
    subnormal, so those weights became 0 while the fp32 normaliser still counted them, and
    the output was 0 (relative error 1.0; 9e-2 at g = 11). The tuner's gate sees random
    inputs only, so no P.V accumulator the space offers may do worse than fp32 here."""
    nq, nk, d, gap = 16, 256, 64, 14.0
    q = torch.zeros(1, 1, nq, d)
    q[..., 0] = 1.0
    k = torch.zeros(1, 1, nk, d)
    k[:, :, 0, 0] = gap  # scale 1: key 0 scores gap, every other key 0
    v = torch.randn(1, 1, nk, d)
    v[:, :, 0] = 0.0
    q, k, v = (t.to(device, torch.float16) for t in (q, k, v))
    ref = attention_ref(q, k, v, False, 1.0)[0].to(device)

    def error(pv_acc):
        cfg = config(BLOCK_M=16, BLOCK_N=64, exp2=exp2, pv_acc=pv_acc)
        out = attention_ops.attention_forward(q, k, v, False, 1.0, config=cfg)
        return ((out.double() - ref).norm() / ref.norm()).item()

    fp32 = error("fp32")
    assert fp32 < 1e-2, fp32
    errors = {pv_acc: error(pv_acc) for pv_acc in PV_ACC}
    assert all(err <= 3 * fp32 for err in errors.values()), (errors, fp32)


# --- tensor kinds ----------------------------------------------------------------------------------

def test_an_output_too_long_for_32_bit_offsets_is_refused_before_launch(device, monkeypatch):
    """q expanded along N (row stride 0) passes q's own 32-bit offset check, but its output is
    a fresh contiguous (N, D) per head: N * D past 2**31 elements made the kernel's int32
    store offsets wrap (writes out of bounds). Refused with a ValueError, before allocating."""
    def launched(*args, **kwargs):
        raise AssertionError("the kernel was launched")

    monkeypatch.setattr(attention_ops, "run_variant", launched)
    n, d = 2**23 + 1, 256  # N * D = 2**31 + 256 elements of output
    q = torch.zeros(1, 1, 1, d, dtype=torch.float16, device=device).expand(1, 1, n, d)
    k = v = torch.zeros(1, 1, 16, d, dtype=torch.float16, device=device)
    with pytest.raises(ValueError, match="output: offsets inside one head pass 2\\*\\*31"):
        flashtune.attention(q, k, v)
    with pytest.raises(ValueError, match="output: offsets inside one head pass 2\\*\\*31"):
        attention_ops.attention_forward(q, k, v)


def test_sparse_and_nested_inputs_are_type_errors(device):
    q, k, v = _qkv(device)
    with pytest.raises(TypeError, match="q must be a dense strided tensor"):
        flashtune.attention(q.to_sparse(), k, v)
    with pytest.raises(TypeError, match="v must be a dense strided tensor"):
        flashtune.attention(q, k, v.to_sparse())
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # nested tensors are a prototype API
        nested = torch.nested.nested_tensor([q[0], q[0]])
    with pytest.raises(TypeError, match="k must be a dense strided tensor"):
        flashtune.attention(q, nested, v)


def test_mixed_dtypes_and_three_d_inputs(device):
    q, k, v = _qkv(device)
    with pytest.raises(TypeError, match="k has dtype torch.bfloat16 but q has torch.float16"):
        flashtune.attention(q, k.bfloat16(), v)
    with pytest.raises(TypeError, match="q has dtype torch.float32"):
        flashtune.attention(q.float(), k.float(), v.float())
    with pytest.raises(ValueError, match="q must be 4-D"):
        flashtune.attention(q[0], k[0], v[0])


# --- autograd, compile, vmap -------------------------------------------------------------------------

@pytest.mark.parametrize("which", ["k", "v"])
def test_backward_through_k_or_v_raises(device, which):
    q, k, v = _qkv(device)
    {"k": k, "v": v}[which].requires_grad_(True)
    out, lse = flashtune.attention(q, k, v, return_lse=True)
    assert out.requires_grad and lse.requires_grad
    with pytest.raises(NotImplementedError, match="no backward"):
        lse.sum().backward()


def test_forward_mode_ad_raises_instead_of_dropping_the_tangent(device):
    q, k, v = _qkv(device)
    with fwAD.dual_level():
        dual = fwAD.make_dual(k, torch.randn_like(k))
        with pytest.raises(NotImplementedError, match="forward-mode AD"):
            flashtune.attention(q, dual, v)
        with pytest.raises(NotImplementedError, match="forward-mode AD"):
            torch.ops.flashtune.attention_fwd(q, dual, v, False, 0.25, False)
        # Plain tensors inside a dual level are fine.
        assert check_case(flashtune.attention(q, k, v), None, q, k, v, False) is None
    with pytest.raises(NotImplementedError, match="forward-mode AD"):
        torch.func.jvp(lambda a: flashtune.attention(a, k, v), (q,), (torch.ones_like(q),))


def test_torch_compile_fullgraph(device):
    q, k, v = _qkv(device, nq=9, nk=21, layout="bnhd")

    # aot_eager traces the op through its fake implementation (what inductor sees) without a
    # C++ build; the GPU suite covers inductor.
    @torch.compile(fullgraph=True, backend="aot_eager", dynamic=True)
    def block(q, k, v):
        out, lse = flashtune.attention(q, k, v, causal=True, return_lse=True, scale=0.3)
        return out * 2, lse

    out, lse = block(q, k, v)
    eager, eager_lse = flashtune.attention(q, k, v, causal=True, return_lse=True, scale=0.3)
    assert torch.equal(out, eager * 2) and torch.equal(lse, eager_lse)
    assert out.stride() == eager.stride()


def test_vmap_matches_a_loop(device):
    q = torch.randn(3, 1, 2, 9, 16, dtype=torch.float16, device=device)
    k, v = (torch.randn(3, 1, 1, 13, 16, dtype=torch.float16, device=device) for _ in range(2))
    batched = torch.vmap(lambda a, b, c: flashtune.attention(a, b, c, causal=True))(q, k, v)
    looped = torch.stack([flashtune.attention(q[i], k[i], v[i], causal=True) for i in range(3)])
    assert torch.equal(batched, looped)


def test_vmap_runs_the_kernel_once_with_no_fallback_warning(device):
    """README: torch.ops.flashtune.* have vmap rules. Without one torch loops over the batch
    and warns of a "performance drop"; here the vmapped dim folds into the kernel's batch,
    for any in_dims, shared (unbatched) k/v, and lse."""
    q = torch.randn(2, 3, 2, 9, 16, dtype=torch.float16, device=device)  # vmapped dim 1
    k, v = (torch.randn(2, 1, 13, 16, dtype=torch.float16, device=device) for _ in range(2))
    kb = torch.randn(3, 2, 1, 13, 16, dtype=torch.float16, device=device)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        out, lse = torch.vmap(
            lambda a, b, c: flashtune.attention(a, b, c, causal=True, return_lse=True),
            in_dims=(1, None, None))(q, k, v)
        out_b = torch.vmap(lambda a, b: flashtune.attention(a, b, v, scale=0.5),
                           in_dims=(1, 0))(q, kb)
    for i in range(3):
        ref, ref_lse = flashtune.attention(q[:, i], k, v, causal=True, return_lse=True)
        assert torch.equal(out[i], ref) and torch.equal(lse[i], ref_lse)
        assert torch.equal(out_b[i], flashtune.attention(q[:, i], kb[i], v, scale=0.5))
    assert out.shape == (3, 2, 2, 9, 16) and lse.shape == (3, 2, 2, 9)


# --- dispatcher: an input error does not cost the tuned config -------------------------------------

@pytest.mark.skipif(torch.cuda.is_available(), reason="needs CPU tensors refused without the interpreter")
def test_unlaunchable_input_keeps_the_tuned_config(fresh_db, monkeypatch):  # noqa: F811
    p = AttentionProblem(1, 2, 2, 9, 13, 16, False, "float16")
    seed_attention(fresh_db, p, config(BLOCK_M=16, BLOCK_N=16))
    q, k, v = _qkv(DEVICE)
    monkeypatch.setenv("TRITON_INTERPRET", "0")
    with warnings.catch_warnings():
        warnings.simplefilter("error", dispatch.DispatchWarning)  # no "tuned config failed"
        with pytest.raises(ValueError, match="q is on cpu"):
            flashtune.attention(q, k, v)
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    assert dispatch.attention_choice(p, DEVICE).how == "exact"
    out = flashtune.attention(q, k, v)
    assert check_case(out, None, q, k, v, False) is None


@pytest.mark.gpu
@pytest.mark.parametrize("knobs", [dict(BLOCK_M=64, BLOCK_N=32, num_warps=4, num_stages=3),
                                   dict(BLOCK_M=128, BLOCK_N=64, num_warps=8, num_stages=2),
                                   dict(BLOCK_M=64, BLOCK_N=64, num_warps=4, num_stages=3, tma=True),
                                   dict(BLOCK_M=64, BLOCK_N=32, num_warps=4, num_stages=2,
                                        persistent=True)])
def test_gpu_minus_inf_key_tiles_and_nan_like_torch(knobs):
    """Compiled kernels (native max/exp2, MMA) on -inf and NaN inputs, against torch."""
    if knobs.get("tma") and "tma" not in attention_ops.device_features(torch.device("cuda")):
        pytest.skip("no TMA here")
    gen = torch.Generator().manual_seed(2)
    q = (torch.rand(2, 4, 300, 64, generator=gen) + 0.1).to("cuda", torch.float16)
    k, v = (torch.randn(2, 2, 520, 64, generator=gen).to("cuda", torch.float16) for _ in range(2))
    k[:, :, 64:192] = float("-inf")  # whole key tiles with -inf scores
    v[1, 1, 10, 5] = float("nan")  # a key every query sees (torch also spreads masked ones)
    for causal in (False, True):
        out = attention_ops.attention_forward(q, k, v, causal, config=config(**knobs))
        ref = _sdpa32(q, k, v, attn_mask=causal_lower_right(300, 520) if causal else None)
        assert torch.equal(out.isnan(), ref.isnan()), (knobs, causal)
        fin = torch.isfinite(ref)
        torch.testing.assert_close(out.float()[fin], ref[fin], atol=2e-3, rtol=2e-3)


@pytest.mark.gpu
@pytest.mark.parametrize("knobs", [dict(BLOCK_M=64, BLOCK_N=32, num_warps=4, num_stages=3),
                                   dict(BLOCK_M=16, BLOCK_N=16, num_warps=1, num_stages=2,
                                        exp2=False),
                                   dict(BLOCK_M=64, BLOCK_N=16, num_warps=4, num_stages=2,
                                        persistent=True)])
def test_gpu_plus_inf_score_gives_lse_plus_inf(knobs):
    """Compiled kernels (native max, exp2, FMA) on +inf / NaN / -inf scores: LSE +inf, NaN,
    -inf where the float64 oracle has them (test_a_plus_inf_score_gives_lse_plus_inf)."""
    _check_plus_inf_rows("cuda", config(**knobs))


def test_tma_refuses_rows_that_repeat_or_overlap():
    """The kernels' tensor descriptors are 2-D per head, (N, D) with strides (stride(-2), 1):
    k/v expanded along N (row stride 0) or as_strided rows closer than D apart are no tensor a
    descriptor can describe, and a chosen TMA config must fall back to pointer loads there."""
    dense = torch.randn(1, 2, 32, 64, dtype=torch.float16)
    assert attention_ops.tma_misfit(dense) is None
    assert attention_ops.tma_misfit(dense.transpose(1, 2).contiguous().transpose(1, 2)) is None
    assert attention_ops.tma_misfit(dense[:, :, :1].expand(1, 2, 1, 64)) is None  # one row
    repeated = dense[:, :, :1].expand(1, 2, 32, 64)
    assert "overlap" in attention_ops.tma_misfit(dense, repeated)
    overlapping = dense.flatten().as_strided((1, 2, 32, 64), (4096, 2048, 8, 1))
    assert "overlap" in attention_ops.tma_misfit(overlapping)


@pytest.mark.parametrize("which", [0, 1, 2], ids=["q", "k", "v"])
def test_a_storage_less_zero_tensor_input_gives_the_result_of_zeros(fresh_db, which):
    """Defect: a torch._efficientzerotensor (what autograd makes for zero gradients) has
    data_ptr() 0 and a plain tensor's plan key; the kernel was launched on it (the interpreter
    raised 'invalid python storage'; on CUDA it would read address 0), first call or from a
    stored plan. It takes the op, whose ZeroTensor fallback gives the kernel real zeros."""
    q, k, v = _qkv(DEVICE, nq=16, nk=16, d=32)
    args = [q, k, v]
    flashtune.attention(q, k, v)  # a plan for this exact key exists now
    args[which] = torch._efficientzerotensor(q.shape, dtype=q.dtype, device=q.device)
    dense = [torch.zeros_like(q) if a._is_zerotensor() else a for a in args]
    out = flashtune.attention(*args)
    torch.testing.assert_close(out, flashtune.attention(*dense), atol=0, rtol=0)
    assert out.isfinite().all()


def test_reference_oracle_is_exact_at_huge_scores():
    """The float64 oracle the tests trust: with probabilities as exp(s - lse), a row whose
    scores reach 2**60 lost log(n) to rounding (s - lse rounded to 0), every key got weight 1
    and the output summed v instead of averaging it. Identical keys must average v."""
    from flashtune.reference import attention_ref

    q = torch.ones(1, 1, 3, 16, dtype=torch.float64)
    k = torch.ones(1, 1, 5, 16, dtype=torch.float64)
    v = torch.randn(1, 1, 5, 16, dtype=torch.float64)
    for scale in (1.0, 1e20):
        out, lse = attention_ref(q, k, v, scale=scale)
        torch.testing.assert_close(out, v.mean(2, keepdim=True).expand(1, 1, 3, 16))
        assert torch.isfinite(lse).all()
