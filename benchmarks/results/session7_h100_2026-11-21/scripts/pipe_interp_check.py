import os
os.environ["TRITON_INTERPRET"] = "1"
import torch, pytest
import sys; sys.path.insert(0, os.path.dirname(__file__))
import pipe

@pytest.mark.parametrize("rows,cols,splits,block,programs,polls", [
    (3, 1000, 4, 64, 1, 2), (3, 1000, 2, 128, 1, 1 << 16), (5, 777, 8, 32, 3, 4), (2, 4096, 16, 64, 2, 3),
    (4, 100, 2, 64, 5, 1 << 16)])
@pytest.mark.parametrize("dtype", [torch.float16, torch.float32])
def test_pipe(rows, cols, splits, block, programs, polls, dtype):
    x = (torch.randn(rows, cols) * 4).to(dtype)
    x[0, 3] = float("-inf")
    y = torch.empty_like(x)
    for _ in range(2):  # the counters are left zero: a second launch is right too
        pipe.launch(x, y, splits, block, 4, programs, max_polls=polls)
        ref = torch.softmax(x.double(), -1)
        assert (y.double() - ref).abs().max() < (2e-3 if dtype == torch.float16 else 1e-6)
    assert int(pipe._COUNTERS[x.device].abs().sum()) == 0
