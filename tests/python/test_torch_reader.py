"""The fast torch tensor reader (_posenc_torch, built with libtorch-dev) reads what the Python
attribute path reads: the same rotations bit for bit and the same errors, and it is in use
wherever it was built."""
import pathlib

import pytest
import torch

import posenc
from posenc import _posenc

BUILT = any(pathlib.Path(posenc.__file__).parent.glob("_posenc_torch*.so"))


@pytest.fixture
def paths():
    """Runs the body once with each reader; restores the default."""
    default = _posenc._torch_fast_reader()
    yield
    _posenc._torch_fast_reader(default)


def test_in_use_where_built():
    assert _posenc._torch_fast_reader() == BUILT


def both(fn):
    results = []
    for fast in ([True, False] if BUILT else [False]):
        _posenc._torch_fast_reader(fast)
        assert _posenc._torch_fast_reader() == fast
        results.append(fn())
    return results


def test_same_results(paths):
    spec = posenc.RopeSpec.preset("llama-3.1-8b")
    qkv = torch.randn(5, 12, 128)
    for dtype in (torch.float32, torch.float16, torch.bfloat16):
        base = qkv.to(dtype)
        cases = [
            (base[:, :8], base[:, 8:10], torch.arange(5, dtype=torch.int32)),   # packed views
            (base.reshape(1, 5, 12, 128).transpose(1, 2)[:, :8], None, torch.arange(5)[None]),
            (base.reshape(5, 12 * 128), None, torch.arange(5)),
        ]
        for q, k, p in cases:
            kwargs = {"head_size": 128} if q.dim() == 2 else {}
            out = both(lambda: posenc.apply_rope(q, k, p, spec, **kwargs))
            for a, b in zip(out[0], out[-1]):
                assert (a is None and b is None) or torch.equal(a, b)


@pytest.mark.parametrize("make,error", [
    (lambda: torch.empty(2, 4, 128, device="meta"), ValueError),
    (lambda: torch.zeros(2, 4, 128, dtype=torch.complex64), TypeError),
    (lambda: torch.zeros(2, 4, 128, dtype=torch.uint8), TypeError),
    (lambda: torch.zeros(2, 128, 4).transpose(1, 2), ValueError),
    (lambda: torch.zeros(2, 4, 128).to_sparse(), ValueError),
])
def test_same_errors(paths, make, error):
    spec = posenc.RopeSpec.preset("llama-2-7b")
    messages = []
    for fast in ([True, False] if BUILT else [False]):
        _posenc._torch_fast_reader(fast)
        with pytest.raises(error) as e:
            posenc.apply_rope_(make(), None, [0, 1], spec)
        messages.append(str(e.value))
    assert len(set(messages)) == 1, messages
