"""DTensor inputs (tensor parallelism): flashtune.softmax / log_softmax work where torch's do."""

from __future__ import annotations

import pytest
import torch
import torch.distributed as dist

import flashtune

pytestmark = pytest.mark.skipif(not dist.is_available(), reason="torch built without distributed")


@pytest.fixture
def mesh():
    from torch.distributed.device_mesh import init_device_mesh

    # One CPU process (gloo, an in-memory store): DTensor's dispatch runs as on a real mesh.
    dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
    try:
        yield init_device_mesh("cpu", (1,))
    finally:
        dist.destroy_process_group()


@pytest.mark.parametrize("log", [False, True])
def test_dtensor_forward_and_backward_match_torch(mesh, log):
    """A custom op has no DTensor sharding strategy unless one is registered: this raised
    NotImplementedError ("Operator flashtune.softmax.default does not have a sharding strategy
    registered"), where torch.softmax of a DTensor works."""
    from torch.distributed.tensor import Replicate, Shard, distribute_tensor

    ours = flashtune.log_softmax if log else flashtune.softmax
    ref = torch.log_softmax if log else torch.softmax
    x = torch.randn(4, 6, 10)
    g = torch.randn(4, 6, 10)
    for placement in (Replicate(), Shard(0), Shard(2)):  # Shard(2): the reduced dim
        for dim in (-1, 1):
            xd = distribute_tensor(x, mesh, [placement]).requires_grad_()
            y = ours(xd, dim)
            assert type(y).__name__ == "DTensor"
            y.backward(distribute_tensor(g, mesh, y.placements))
            xr = x.clone().requires_grad_()
            yr = ref(xr, dim)
            yr.backward(g)
            torch.testing.assert_close(y.full_tensor(), yr)
            torch.testing.assert_close(xd.grad.full_tensor(), xr.grad)
            with torch.no_grad():
                torch.testing.assert_close(ours(xd, dim).full_tensor(), yr.detach())


def test_first_dtensor_call_may_be_a_compiled_one():
    """The sharding strategy was registered by eager calls only (dynamo cannot trace the
    registration), so a program whose first flashtune call on a DTensor ran under torch.compile
    failed with "Operator flashtune.softmax.default does not have a sharding strategy
    registered" (after one eager call, compiled ones worked). The registration is per process:
    hence a fresh interpreter, where no eager call came first."""
    import os
    import subprocess
    import sys

    code = (
        "import torch, torch.distributed as dist, flashtune\n"
        "from torch.distributed.device_mesh import init_device_mesh\n"
        "from torch.distributed.tensor import Shard, distribute_tensor\n"
        "dist.init_process_group('gloo', store=dist.HashStore(), rank=0, world_size=1)\n"
        "mesh = init_device_mesh('cpu', (1,))\n"
        "x = torch.randn(4, 6, 10)\n"
        "xd = distribute_tensor(x, mesh, [Shard(0)]).requires_grad_()\n"
        "f = torch.compile(lambda t: flashtune.softmax(t, -1) + flashtune.log_softmax(t, 1),\n"
        "                  fullgraph=True)\n"
        "y = f(xd)\n"
        "y.sum().backward()\n"
        "xr = x.clone().requires_grad_()\n"
        "yr = torch.softmax(xr, -1) + torch.log_softmax(xr, 1)\n"
        "yr.sum().backward()\n"
        "torch.testing.assert_close(y.full_tensor(), yr)\n"
        "torch.testing.assert_close(xd.grad.full_tensor(), xr.grad)\n"
        "dist.destroy_process_group()\n"
        "print('ok')\n")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [
        os.path.dirname(os.path.dirname(flashtune.__file__)), os.environ.get("PYTHONPATH")])))
    out = subprocess.run([sys.executable, "-W", "ignore", "-c", code], capture_output=True,
                         text=True, env=env)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip() == "ok"
