"""Audit of concurrency and re-entrancy inside one process: other threads calling
``flashtune.dispatch.reset()`` (or deciding the same problem) while a first call is under way,
and signal handlers of the same thread calling flashtune inside one. CPU only (Triton's
interpreter, tests/conftest.py); a reset "in another thread" is simulated at the exact point
inside the call where a thread switch would put it, a signal handler at each line where one
could run (blocking.interrupting), so each test fails every time without its fix."""

from __future__ import annotations

import signal
import sys
import warnings

import pytest
import torch

import flashtune
import flashtune.dispatch as dispatch
from attention_cases import config as attention_config
from blocking import interrupting, within
from dispatch_helpers import DEVICE, fresh_db, seed_attention  # noqa: F401
from flashtune.dispatch import plans
from flashtune.dispatch.chooser import Dispatcher
from flashtune.dispatch.runtime import Runtime
from flashtune.gen import loader, row_sync, variants
from flashtune.gen.attention_space import AttentionProblem

pytestmark = [pytest.mark.filterwarnings("ignore::RuntimeWarning:triton"),
              pytest.mark.filterwarnings("ignore::flashtune.cache.CacheWarning"),
              pytest.mark.filterwarnings("ignore:invalid value encountered:RuntimeWarning")]


def _sdpa(q, k, v):
    return torch.nn.functional.scaled_dot_product_attention(q.float(), k.float(), v.float())


def _broken_tuned_attention(fresh_db, monkeypatch, on_launch):
    """A tuned attention winner (BLOCK_M=16) whose kernel fails to launch; ``on_launch(cfg)``
    runs at each launch of any attention variant, before the broken one raises."""
    seed_attention(fresh_db, AttentionProblem(1, 2, 2, 32, 32, 32, False, "float16"),
                   attention_config(BLOCK_M=16, BLOCK_N=16))
    real = variants.load_variant

    class Wrapped:
        def __init__(self, module, cfg):
            self.module, self.cfg = module, cfg

        def launch(self, *args):
            on_launch(self.cfg)
            if self.cfg["BLOCK_M"] == 16:
                raise RuntimeError("out of resources (simulated)")
            return self.module.launch(*args)

    def load(op, cfg):
        module = real(op, cfg)
        return Wrapped(module, cfg) if op == "attention_fwd" else module

    monkeypatch.setattr(variants, "load_variant", load)  # the first call's path
    monkeypatch.setattr(plans, "load_variant", load)     # the plans'


def test_attention_fallback_survives_a_reset_in_another_thread(fresh_db, monkeypatch):
    """Defect: after a tuned config failed, the retry asked the live dispatcher again; a
    reset() in another thread between the failure and the retry (a fresh dispatcher that has
    not seen the failure) handed the failing config back, and the caller got the kernel's
    error instead of the fallback (every first call, with a thread resetting every ms)."""
    _broken_tuned_attention(fresh_db, monkeypatch, lambda cfg: None)
    real_fall_back = Dispatcher.fall_back

    def fall_back_then_reset(self, *args, **kwargs):
        fallback = real_fall_back(self, *args, **kwargs)
        dispatch.reset()  # another thread, between the fallback decision and the retry
        return fallback

    monkeypatch.setattr(Dispatcher, "fall_back", fall_back_then_reset)
    q, k, v = (torch.randn(1, 2, 30, 32, device=DEVICE, dtype=torch.float16) for _ in "qkv")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        out = flashtune.attention(q, k, v)
    torch.testing.assert_close(out.float(), _sdpa(q, k, v), atol=2e-2, rtol=2e-2)


def test_attention_plan_is_the_config_that_ran_not_a_fresh_decision(fresh_db, monkeypatch):
    """Defect: the plan of a first call was built from the dispatcher's decision asked again
    after the call, and stored without being tried. A reset() in another thread after the
    fallback ran (a fresh dispatcher picks the failing tuned config again) left a plan that
    raised the kernel's error on every later call of that shape, never falling back."""
    state = {"armed": True}

    def on_launch(cfg):
        if cfg["BLOCK_M"] != 16 and state["armed"]:  # the fallback's launch: reset meanwhile
            state["armed"] = False
            dispatch.reset()

    _broken_tuned_attention(fresh_db, monkeypatch, on_launch)
    q, k, v = (torch.randn(1, 2, 30, 32, device=DEVICE, dtype=torch.float16) for _ in "qkv")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for _ in range(3):  # the first call stores the plan, the others run it
            out = flashtune.attention(q, k, v)
            torch.testing.assert_close(out.float(), _sdpa(q, k, v), atol=2e-2, rtol=2e-2)


def _reset_during_first_launch(monkeypatch, op_prefix):
    """Each first launch of an ``op_prefix`` kernel runs reset() with FLASHTUNE_DISABLE=1 set
    (another thread turning flashtune off while the call is under way)."""
    real = plans.load_variant
    armed = {"on": True}

    class Wrapped:
        def __init__(self, module):
            self.module = module

        def launch(self, *args):
            if armed["on"]:
                armed["on"] = False
                monkeypatch.setenv("FLASHTUNE_DISABLE", "1")
                dispatch.reset()
            return self.module.launch(*args)

    def load(op, cfg):
        module = real(op, cfg)
        return Wrapped(module) if op.startswith(op_prefix) else module

    monkeypatch.setattr(plans, "load_variant", load)
    monkeypatch.setattr(variants, "load_variant", load)


def _all_plans():
    r = dispatch.RUNTIME
    return [*r.plans.values(), *r.backward_plans.values(), r.attention_plans]


@pytest.mark.parametrize("log", [False, True])
def test_forward_plan_of_a_call_that_overlapped_reset_is_not_kept(fresh_db, monkeypatch, log):
    """Defect: a first call stored its plan after a reset() that another thread ran meanwhile
    (6 runs of 6 with a thread setting FLASHTUNE_DISABLE=1 and resetting during a loop of first
    calls); the hot path then served that plan, built from the old settings and dispatcher,
    for good: flashtune kernels kept running that shape although flashtune was turned off
    (likewise a new FLASHTUNE_DB's winners were never used for it)."""
    _reset_during_first_launch(monkeypatch, "log_softmax" if log else "softmax")
    f, ref = (flashtune.log_softmax, torch.log_softmax) if log else (flashtune.softmax, torch.softmax)
    x = torch.randn(3, 40, device=DEVICE)
    torch.testing.assert_close(f(x), ref(x, -1))
    assert not any(_all_plans()), "a plan of the old settings outlived reset()"
    monkeypatch.setattr(plans, "load_variant", None)  # disabled: no kernel may load now
    torch.testing.assert_close(f(x), ref(x, -1))


def test_backward_plan_of_a_call_that_overlapped_reset_is_not_kept(fresh_db, monkeypatch):
    x = torch.randn(3, 40, device=DEVICE, requires_grad=True)
    y = flashtune.softmax(x)
    _reset_during_first_launch(monkeypatch, "softmax_backward")
    g = torch.randn_like(y)
    y.backward(g)
    x64 = x.detach().double().requires_grad_(True)
    torch.softmax(x64, -1).backward(g.double())
    torch.testing.assert_close(x.grad, x64.grad.float())
    assert not any(_all_plans()), "a plan of the old settings outlived reset()"


def test_attention_plan_of_a_call_that_overlapped_reset_is_not_kept(fresh_db, monkeypatch):
    _reset_during_first_launch(monkeypatch, "attention_fwd")
    q, k, v = (torch.randn(1, 2, 16, 32, device=DEVICE, dtype=torch.float16) for _ in "qkv")
    torch.testing.assert_close(flashtune.attention(q, k, v).float(), _sdpa(q, k, v),
                               atol=2e-2, rtol=2e-2)
    assert not dispatch.RUNTIME.attention_plans, "a plan of the old settings outlived reset()"


# -- re-entry: a signal handler of this thread calling flashtune inside a first call ---------

def _softmax_call(rows: int) -> None:
    x = torch.randn(rows, 40, device=DEVICE)
    torch.testing.assert_close(flashtune.softmax(x), torch.softmax(x, -1))


def _backward_call(rows: int) -> None:
    x = torch.randn(rows, 40, device=DEVICE, requires_grad=True)
    g = torch.randn(rows, 40, device=DEVICE)
    x64 = x.detach().double().requires_grad_(True)
    with torch.enable_grad():  # off where a nested call runs inside an autograd.Function
        flashtune.log_softmax(x).backward(g)
        torch.log_softmax(x64, -1).backward(g.double())
    torch.testing.assert_close(x.grad, x64.grad.float())


def _attention_call(rows: int) -> None:
    q = torch.randn(1, 2, rows, 32, device=DEVICE, dtype=torch.float16)
    k, v = (torch.randn(1, 2, 24, 32, device=DEVICE, dtype=torch.float16) for _ in "kv")
    torch.testing.assert_close(flashtune.attention(q, k, v).float(), _sdpa(q, k, v),
                               atol=2e-2, rtol=2e-2)


# The locks a first call takes, each held while the call does something long enough for a
# signal to come (read the database, write and import a kernel, store the plan).
_FIRST_CALL_LOCKS = {"winner table": lambda: dispatch.RUNTIME.dispatcher._lock,
                     "kernel import": lambda: loader._lock,
                     "plan store": lambda: dispatch.RUNTIME._store_lock}


# On CUDA, autograd runs a backward on its device thread, not the caller's: a handler's
# backward inside a first call waits for that thread, which waits for the lock the interrupted
# call holds. No re-entrant lock can see that the two threads are one caller: a deadlock left
# as it is (README); the CPU run covers the locks' re-entry on the calling thread.
_CPU_BACKWARD = pytest.param(_backward_call, id="backward", marks=pytest.mark.skipif(
    DEVICE == "cuda", reason="CUDA backward runs on autograd's device thread"))


@pytest.mark.skipif(not hasattr(signal, "SIGALRM"), reason="needs SIGALRM")
@pytest.mark.parametrize("lock", _FIRST_CALL_LOCKS)
@pytest.mark.parametrize("call", [pytest.param(_softmax_call, id="softmax"), _CPU_BACKWARD,
                                  pytest.param(_attention_call, id="attention")])
def test_a_first_call_inside_a_first_call_of_the_same_thread_does_not_deadlock(
        fresh_db, tmp_path, monkeypatch, call, lock):
    """Defect: a signal handler runs between two bytecodes of the main thread, whatever locks
    it holds; one that called flashtune with a new shape while the main thread was inside a
    first call (loading the winner table, importing a kernel, storing the plan) waited forever
    on the lock that call held. Here the nested call runs at each line of flashtune's code that
    runs under the lock, each time with a shape of its own (a first call too): the first one
    inside the kernel import needs the very kernel being imported."""
    monkeypatch.setenv("FLASHTUNE_CACHE_DIR", str(tmp_path / "cache"))  # kernels to import
    dispatch.reset()  # and a winner table to load
    shapes = iter(range(2, 10_000))
    with within(60), interrupting(lambda: call(next(shapes)), _FIRST_CALL_LOCKS[lock]()) as calls:
        call(1)
    assert calls, f"no nested call ran while the {lock} lock was held"


@pytest.mark.skipif(not hasattr(signal, "SIGALRM"), reason="needs SIGALRM")
def test_a_reset_inside_store_plan_leaves_no_stale_plan(fresh_db, monkeypatch):
    """Defect: a signal handler that turned flashtune off (FLASHTUNE_DISABLE=1, reset()) while
    the main thread stored a first call's plan waited forever on the store lock; once the lock
    let it in, the plan of the old settings was stored after its reset() and served for good.
    Here the reset runs at each line of store_plan in turn, one first call for each."""
    for line in range(100):
        monkeypatch.delenv("FLASHTUNE_DISABLE", raising=False)
        dispatch.reset()

        def turn_off():
            monkeypatch.setenv("FLASHTUNE_DISABLE", "1")
            dispatch.reset()

        x = torch.randn(3, 40 + line, device=DEVICE)
        with within(60), interrupting(turn_off, dispatch.RUNTIME._store_lock,
                                      code=Runtime.store_plan.__code__, at=line) as calls:
            torch.testing.assert_close(flashtune.softmax(x), torch.softmax(x, -1))
        if not calls:
            break  # store_plan has fewer lines under the lock: each one was tried
        assert not any(_all_plans()), f"a plan of the old settings outlived reset() (line {line})"
    assert line > 1, "the reset never ran inside store_plan"


@pytest.mark.skipif(not hasattr(signal, "SIGALRM"), reason="needs SIGALRM")
def test_a_kernel_import_inside_the_same_import_keeps_one_module(tmp_path, monkeypatch):
    """A nested first call needs the kernel that the interrupted call is importing: it imports
    the kernel itself. Defect (with a re-entrant lock only): the interrupted call then stored
    its own module, another than the one sys.modules named; one module per variant is kept.
    The nested call comes at each line of the import in turn, one first call for each."""
    for line in range(100):
        folder = tmp_path / str(line)  # a kernel not imported yet
        monkeypatch.setenv("FLASHTUNE_CACHE_DIR", str(folder))
        with within(60), interrupting(lambda: _softmax_call(100 + line), loader._lock,
                                      code=loader.load.__code__, at=line) as calls:
            _softmax_call(1 + line)
        if not calls:
            break  # load has fewer lines under the lock: each one was tried
        imported = [(key, module) for key, module in loader._loaded.items()
                    if key[1] == str(folder / "kernels")]
        assert len(imported) == 1
        (name, _, _), module = imported[0]
        assert sys.modules[f"flashtune_kernels.{name}"] is module, f"line {line}"
    assert line > 5, "the nested call never ran inside load"


@pytest.mark.skipif(not hasattr(signal, "SIGALRM"), reason="needs SIGALRM")
def test_a_first_call_inside_the_rejection_of_a_failed_config(fresh_db, monkeypatch):
    """Defect: a nested first call (a signal handler's) while the dispatcher rejected a tuned
    config that failed to launch waited forever on the dispatcher's lock. Here it runs at each
    line of reject under the lock, each with a shape of its own, of the broken config's bucket."""
    _broken_tuned_attention(fresh_db, monkeypatch, lambda cfg: None)
    rows = iter(range(17, 33))

    def nested():
        n = next(rows)
        q, k, v = (torch.randn(1, 2, n, 32, device=DEVICE, dtype=torch.float16) for _ in "qkv")
        torch.testing.assert_close(flashtune.attention(q, k, v).float(), _sdpa(q, k, v),
                                   atol=2e-2, rtol=2e-2)

    q, k, v = (torch.randn(1, 2, 30, 32, device=DEVICE, dtype=torch.float16) for _ in "qkv")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with within(60), interrupting(nested, dispatch.RUNTIME.dispatcher._lock,
                                      code=Dispatcher.reject.__code__) as calls:
            out = flashtune.attention(q, k, v)
    torch.testing.assert_close(out.float(), _sdpa(q, k, v), atol=2e-2, rtol=2e-2)
    assert len(calls) > 2, "the nested call never ran inside reject"


def _fake_persistent_launch(device: torch.device, n: int) -> None:
    """What a persistent split launch does with its polled-partials workspace, the kernel's
    part in stream order (CPU: no such kernel here): finds its half all zero, zeroes the
    stale words of the launch before, writes its partials."""
    with row_sync.polled_partials(device, n) as ws:
        assert not ws.slots.any(), "a launch got a half that holds another launch's partials"
        ws.stale[:ws.n_stale] = 0
        ws.slots[:n] = 7


@pytest.mark.skipif(not hasattr(signal, "SIGALRM"), reason="needs SIGALRM")
def test_a_launch_inside_a_launch_of_the_same_thread_gets_a_workspace_of_its_own():
    """Defect: the persistent split (CUDA) holds its workspace's lock from before its launch to
    after it, so a signal handler's launch on the same stream inside it waited forever on the
    lock; let in, it would get the half the interrupted launch writes. Here a nested launch
    runs at each line of the workspace code under either workspace lock, then launches check
    that the halves still alternate cleanly."""
    device = torch.device("cpu")
    row_sync._PARTIALS.pop((device, 0), None)
    try:
        with within(30), interrupting(lambda: _fake_persistent_launch(device, 3000),
                                      row_sync._PARTIALS_LOCK) as calls:
            _fake_persistent_launch(device, 2000)  # a new workspace: made under the lock
        assert calls, "no launch ran while a workspace was made"
        state = row_sync._PARTIALS[(device, 0)]
        with within(30), interrupting(lambda: _fake_persistent_launch(device, 6),
                                      state.lock) as calls:
            _fake_persistent_launch(device, 8)
        assert len(calls) > 3, "no launch ran inside another"
        for n in (5, 8, 3, 8):
            _fake_persistent_launch(device, n)
    finally:
        row_sync._PARTIALS.pop((device, 0), None)


def test_a_reset_publishes_its_generation_after_its_settings():
    """Defect: reset() bumped the generation before it set the new settings and dispatcher; a
    first call in another thread reading both in between paired the new generation with the
    old dispatcher, and store_plan kept that plan after the reset. Here what such a call would
    read is taken at each line of reset() under its lock."""
    seen = []
    runtime = dispatch.RUNTIME
    with within(60), interrupting(
            lambda: seen.append((runtime.generation, runtime.dispatcher, runtime.disabled)),
            runtime._store_lock, code=Runtime._install.__code__):  # reset()'s work, locked
        dispatch.reset()
    assert len(seen) > 3, "reset() ran too few lines under its lock"
    for generation, dispatcher, disabled in seen:
        if generation == runtime.generation:
            assert dispatcher is runtime.dispatcher and disabled == runtime.disabled


def test_a_first_call_that_passed_the_disable_check_before_a_reset_stores_no_plan(
        fresh_db, monkeypatch):
    """Defect: flashtune.softmax checks FLASHTUNE_DISABLE first; with reset() in another
    thread right after that check, the call built a kernel plan under the new generation, and
    the hot path served our kernels for good although flashtune was off. RUNTIME.forward is
    where such a call is when the reset lands."""
    monkeypatch.setenv("FLASHTUNE_DISABLE", "1")
    dispatch.reset()
    x = torch.randn(3, 37, device=DEVICE)
    torch.testing.assert_close(dispatch.RUNTIME.forward(x, 1, False), torch.softmax(x, 1))
    assert not any(_all_plans())


@pytest.mark.skipif(not hasattr(signal, "SIGALRM"), reason="needs SIGALRM")
def test_a_reject_inside_the_rejection_of_the_same_config_warns_once(fresh_db, monkeypatch):
    """Defect (review): reject checked "failed here before?" and recorded the failure in two
    steps; a signal handler's first call in between failed on the same tuned config, and both
    rejects counted as the first, two warnings for one broken config. The nested call comes
    at each line of reject in turn, a fresh dispatcher for each."""
    from flashtune.dispatch import DispatchWarning

    _broken_tuned_attention(fresh_db, monkeypatch, lambda cfg: None)
    nested_ran = 0
    for line in range(40):
        dispatch.reset()
        x = [torch.randn(1, 2, 30, 32, device=DEVICE, dtype=torch.float16) for _ in "qkv"]
        y = [torch.randn(1, 2, 29, 32, device=DEVICE, dtype=torch.float16) for _ in "qkv"]
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            with within(60), interrupting(lambda: flashtune.attention(*y),
                                          dispatch.RUNTIME.dispatcher._lock,
                                          code=Dispatcher.reject.__code__, at=line) as calls:
                flashtune.attention(*x)
        if not calls:
            break
        nested_ran += 1
        fallbacks = [w for w in caught if issubclass(w.category, DispatchWarning)]
        assert len(fallbacks) == 1, (line, [str(w.message)[:80] for w in fallbacks])
    assert nested_ran > 2, "the nested call never ran inside reject"


@pytest.mark.skipif(not hasattr(signal, "SIGALRM"), reason="needs SIGALRM")
def test_an_import_that_fails_after_a_nested_import_keeps_the_nested_module(tmp_path,
                                                                           monkeypatch):
    """Defect (review): a signal handler imported the same kernel inside an import (stored in
    loader._loaded and sys.modules) and then raised (a KeyboardInterrupt, say); the failed
    outer import popped sys.modules' entry, which was the nested call's module, still served
    from loader._loaded. The handler runs just before the outer import executes the source."""
    monkeypatch.setenv("FLASHTUNE_CACHE_DIR", str(tmp_path))
    exec_line = next(i for i, text in enumerate(open(loader.__file__), 1)
                     if "exec(code, module.__dict__)" in text)
    seen = []

    def nested_then_raise():
        traced = sys._getframe(2)  # the handler's caller is the trace function, its load
        if traced.f_code is not loader.load.__code__ or traced.f_lineno != exec_line or seen:
            return
        seen.append(1)
        _softmax_call(200)  # the same kernel: rows do not change the variant
        raise KeyboardInterrupt

    with within(60), interrupting(nested_then_raise, loader._lock, code=loader.load.__code__):
        with pytest.raises(KeyboardInterrupt):
            _softmax_call(3)
    assert seen, "the handler never ran at the exec line"
    imported = [(key, module) for key, module in loader._loaded.items()
                if key[1] == str(tmp_path / "kernels")]
    assert len(imported) == 1
    (name, _, _), module = imported[0]
    assert sys.modules.get(f"flashtune_kernels.{name}") is module


@pytest.mark.skipif(DEVICE != "cpu", reason="Triton's interpreter (CPU tensors) only")
def test_interpreted_launches_from_several_threads_give_torch_results(fresh_db):
    """Defect: Triton's interpreter keeps one launch's state process-wide (the program id it
    is running, and tl.* patched to its interpreted versions, put back when the launch ends),
    so two threads launching our kernels at once read each other's program ids (rows
    silently left unwritten or written twice) or ran tl.* unpatched (ValueError: 'Did you
    forget to add @triton.jit ?'), on first and later calls alike."""
    import threading

    xs = [torch.randn(64, 24 + 8 * i) for i in range(4)]
    for x in xs:  # plans exist: the race is in the launches, not in the first call's work
        flashtune.softmax(x)
    failures: list[str] = []
    start = threading.Barrier(len(xs))

    def work(x):
        try:
            start.wait()
            for _ in range(3):
                y = flashtune.softmax(x)
                if not torch.allclose(y, torch.softmax(x, -1), atol=1e-6):
                    failures.append(f"wrong values for {tuple(x.shape)}")
        except Exception as err:  # noqa: BLE001 - reported below, with the other failures
            failures.append(repr(err)[:200])

    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-5)  # switch threads often: inside launches, as a busy host does
    try:
        threads = [threading.Thread(target=work, args=(x,)) for x in xs]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
    finally:
        sys.setswitchinterval(interval)
    assert not failures, failures
