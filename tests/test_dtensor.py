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
