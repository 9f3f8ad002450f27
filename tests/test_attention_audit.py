"""flashtune.attention: defects found by an adversarial audit, and cases it checked that no
other test names (tampered attention winner rows, a full opcheck on odd layouts).

- torch.compile of a forward with an input that requires grad used to fail at compile time
  (AOTAutograd traces the backward at once, and the backward formula raised): now the forward
  runs and only a real backward raises NotImplementedError, as in eager.
- torch.func.grad / vjp / jacrev used to fail with torch's RuntimeError about
  autograd.Function.setup_context: now a NotImplementedError naming flashtune.attention.
- The fake implementation accepted a non-finite scale that the real kernel refuses.
Runs on CPU in Triton's interpreter.
"""

from __future__ import annotations

import json
import warnings

import pytest
import sqlalchemy as sa
import torch
from torch._subclasses.fake_tensor import FakeTensorMode

import flashtune
import flashtune.dispatch as dispatch
from attention_cases import Shape, check_case, config, make_qkv
from cli_helpers import run_cli
from dispatch_helpers import DEVICE, fresh_db, seed_attention  # noqa: F401
from flashtune.cache import TuneDB
from flashtune.cache.models import WinnerRow
from flashtune.gen.attention_space import AttentionProblem, problem_bucket

pytestmark = [pytest.mark.filterwarnings("ignore::RuntimeWarning:triton"),
              pytest.mark.filterwarnings("ignore::flashtune.cache.CacheWarning")]

NO_BACKWARD = "flashtune.attention has no backward"


def _qkv(device, nq=9, nk=13, d=16, h=2, hkv=2, layout="bhnd"):
    return make_qkv(Shape(1, h, hkv, nq, nk, d, layout), torch.float16, device)


# --- autograd under torch.compile and torch.func ---------------------------------------------

@pytest.mark.parametrize("dynamic", [False, True])
def test_compiled_forward_with_grad_inputs_runs_and_only_backward_raises(device, dynamic):
    q, k, v = _qkv(device)
    q.requires_grad_(True)

    @torch.compile(fullgraph=True, backend="aot_eager", dynamic=dynamic)
    def block(q, k, v):
        out, lse = flashtune.attention(q, k, v, causal=True, return_lse=True)
        return out * 2, lse

    out, lse = block(q, k, v)  # used to raise BackendCompilerFailed (NotImplementedError)
    eager, eager_lse = flashtune.attention(q, k, v, causal=True, return_lse=True)
    assert torch.equal(out, eager * 2) and torch.equal(lse, eager_lse)
    assert out.requires_grad and lse.requires_grad
    with pytest.raises(NotImplementedError, match=NO_BACKWARD):
        out.float().sum().backward()
    with pytest.raises(NotImplementedError, match=NO_BACKWARD):
        block(q, k, v)[1].sum().backward()
    assert q.grad is None  # no gradient, not a wrong one


def test_torch_func_gradients_raise_not_implemented(device):
    q, k, v = _qkv(device)
    loss = lambda a: flashtune.attention(a, k, v).float().sum()  # noqa: E731
    calls = {
        "grad": lambda: torch.func.grad(loss)(q),
        "vjp": lambda: torch.func.vjp(lambda a: flashtune.attention(a, k, v), q),
        "jacrev": lambda: torch.func.jacrev(lambda a: flashtune.attention(a, k, v))(q),
        "grad of vmap": lambda: torch.func.grad(
            lambda a: torch.func.vmap(lambda r: loss(r))(a).sum())(q[None]),
        "vmap of grad": lambda: torch.func.vmap(torch.func.grad(loss))(q[None]),
        "grad wrt k": lambda: torch.func.grad(
            lambda b: flashtune.attention(q, b, v).float().sum())(k),
    }
    for name, call in calls.items():
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # vmap's "no batching rule" warning
            with pytest.raises(NotImplementedError, match=NO_BACKWARD):
                call()


def test_torch_func_grad_of_something_else_still_runs(device):
    """Only a gradient through attention is refused: a forward on inputs the transform does
    not track (captured tensors, or under no_grad inside it) runs as before."""
    q, k, v = _qkv(device)
    ref = flashtune.attention(q, k, v).float()
    weighted = lambda w: (flashtune.attention(q, k, v).float() * w).sum()  # noqa: E731
    g = torch.func.grad(weighted)(torch.tensor(1.0, device=device))
    torch.testing.assert_close(g, ref.sum())

    def no_grad_inside(w):
        with torch.no_grad():
            out = flashtune.attention(q * w.to(q.dtype), k, v)
        return (out.float() * w).sum()

    g = torch.func.grad(no_grad_inside)(torch.tensor(1.0, device=device))
    torch.testing.assert_close(g, ref.sum())


@pytest.mark.parametrize("dynamic", [None, True])
def test_compiled_scale_argument_that_changes(device, dynamic):
    """A scale passed into a compiled function: on its second value (dynamic=None) or at once
    (dynamic=True) dynamo makes it a symbolic float, which the scale check used to reject
    with a graph break (math.isfinite), so fullgraph=True failed."""
    q, k, v = _qkv(device)
    torch._dynamo.reset()

    @torch.compile(fullgraph=True, backend="aot_eager", dynamic=dynamic)
    def block(q, k, v, scale):
        return flashtune.attention(q, k, v, causal=True, scale=scale)

    for scale in (0.5, 0.25, -0.125):
        out = block(q, k, v, scale)
        assert torch.equal(out, flashtune.attention(q, k, v, causal=True, scale=scale))
    for scale in (float("inf"), float("nan"), 1e300):  # still refused, as in eager
        with pytest.raises(Exception, match="scale must be finite"):
            block(q, k, v, scale)


# --- the registered op ---------------------------------------------------------------------

def test_fake_implementation_refuses_what_the_kernel_refuses(device):
    q, k, v = _qkv(device)
    op = torch.ops.flashtune.attention_fwd.default
    for scale in (float("nan"), float("inf"), 1e300):
        with pytest.raises(ValueError, match="scale must be finite"):
            op(q, k, v, False, scale, False)
        with FakeTensorMode() as mode:
            fq, fk, fv = (mode.from_tensor(t) for t in (q, k, v))
            with pytest.raises(ValueError, match="scale must be finite"):
                op(fq, fk, fv, False, scale, False)


def test_opcheck_on_odd_layouts(device):
    """Fake and real outputs agree on strides for (B, N, H, D) views, stride-0 expands and
    GQA; the full opcheck (autograd registration, AOT dispatch) passes."""
    op = torch.ops.flashtune.attention_fwd.default
    q, k, v = _qkv(device, h=4, hkv=2, layout="bnhd")
    cases = [(q, k, v), (q[:, :, :1].expand_as(q), k, v), (q, k[:, :1].expand_as(k), v)]
    for causal, return_lse in ((True, True), (False, False)):
        for args in cases:
            torch.library.opcheck(op, (*args, causal, 0.3, return_lse))
    grad_q = q.detach().clone().requires_grad_(True)
    torch.library.opcheck(op, (grad_q, k, v, True, 0.3, True),
                          test_utils=("test_schema", "test_autograd_registration",
                                      "test_faketensor"))


# --- the winner database: tampered attention rows --------------------------------------------

_GOOD = dict(BLOCK_M=16, BLOCK_N=16, num_warps=1, num_stages=1, exp2=False, pv_acc="fp32",
             persistent=True, tma=False, warp_specialize=False)


@pytest.mark.parametrize("tamper", [
    {"config": {**_GOOD, "BLOCK_M": 48}},          # out of the space
    {"config": {**_GOOD, "BLOCK_M": "16"}},        # wrong type
    {"config": {**_GOOD, "BLOCK_M": 16.0}},        # float for int (exact type check)
    {"config": {**_GOOD, "exp2": 1}},              # int for bool
    {"config": {**_GOOD, "num_warps": 2}},         # breaks a space constraint (warps x 16 > M)
    {"config": {**_GOOD, "pv_acc": "fp16"}},       # an old tune's: left the space (inaccurate)
    {"config": {k: v for k, v in _GOOD.items() if k != "exp2"}},
    {"config": [1, 2]},
    {"head_dim": 32},                              # a row for another head dim
])
def test_tampered_attention_winner_falls_back_to_the_default(fresh_db, tamper):  # noqa: F811
    p = AttentionProblem(1, 2, 2, 9, 13, 16, False, "float16")
    seed_attention(fresh_db, p, config(**_GOOD))
    values = {}
    if "config" in tamper:
        values["config"] = json.dumps(tamper["config"])
    if "head_dim" in tamper:
        other = AttentionProblem(1, 2, 2, 9, 13, tamper["head_dim"], False, "float16")
        values["bucket"] = json.dumps(problem_bucket(other), sort_keys=True, separators=(",", ":"))
    engine = sa.create_engine(f"sqlite:///{fresh_db}")
    with engine.begin() as conn:  # parameterized UPDATE, written by SQLAlchemy
        assert conn.execute(sa.update(WinnerRow.__table__).values(**values)).rowcount == 1
    engine.dispose()
    q, k, v = _qkv(DEVICE)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for _ in range(3):
            out = flashtune.attention(q, k, v)
    assert check_case(out, None, q, k, v, False) is None
    assert dispatch.attention_choice(p, DEVICE).how == "default"
    ours = [str(w.message) for w in caught if "flashtune" in str(w.message)]
    if "config" in tamper:  # said once, naming the skipped row
        assert len(ours) == 1 and "invalid winner row" in ours[0], ours
    else:  # a valid row of another bucket: simply not used
        assert not ours, ours


def test_a_winner_with_the_fp16_pv_accumulator_is_not_imported(fresh_db, tmp_path, capsys):  # noqa: F811
    """pv_acc='fp16' left the space (test_peaked_attention_keeps_the_small_weights): an export
    file from an older flashtune that holds such a winner is refused by `flashtune import`, as
    any config outside the space is (one bad row rejects the file), naming the row and value."""
    p = AttentionProblem(1, 2, 2, 9, 13, 16, False, "float16")
    seed_attention(fresh_db, p, config(**_GOOD))
    exported = tmp_path / "winners.json"
    assert run_cli(capsys, "export", str(exported), "--db", str(fresh_db))[0] == 0
    doc = json.loads(exported.read_text())
    assert [row["config"]["pv_acc"] for row in doc["winners"]] == ["fp32"]
    doc["winners"][0]["config"]["pv_acc"] = "fp16"
    exported.write_text(json.dumps(doc))
    target = tmp_path / "other.sqlite"
    rc, out, err = run_cli(capsys, "import", str(exported), "--db", str(target))
    assert rc == 2 and "winners[0]" in err, (out, err)
    assert "pv_acc='fp16' is outside the space ['fp32']" in err, err
    if target.exists():  # nothing imported
        with TuneDB(target, read_only=True) as db:
            assert db.winners() == []
