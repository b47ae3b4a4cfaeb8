"""Small helpers shared by the Python layer: torch without importing it, positions, dtypes."""
import sys

import numpy as np


def torch_module():
    """torch if it is imported (a torch tensor cannot exist otherwise), else None."""
    return sys.modules.get("torch")


def is_tensor(x):
    torch = torch_module()
    return torch is not None and isinstance(x, torch.Tensor)


def positions_arg(positions):
    """Tensors and arrays pass through (the C++ side reads any strides, int32 or int64);
    sequences and ranges of ints become int64 arrays."""
    if is_tensor(positions) or isinstance(positions, np.ndarray):
        return positions
    if isinstance(positions, (list, tuple, range)):
        arr = np.asarray(positions)
        if arr.size == 0:
            return arr.astype(np.int64)
        if arr.dtype.kind not in "iu":
            raise TypeError(f"positions: expected integers, got {arr.dtype}")
        return arr.astype(np.int64)
    raise TypeError(f"positions: expected a tensor, an array or a sequence of ints, got {type(positions).__name__}")


def bf16_flag(dtype):
    """dtype="bfloat16" marks numpy uint16 arrays as bfloat16 bits; None leaves dtypes as they are."""
    if dtype is None:
        return False
    if dtype == "bfloat16":
        return True
    raise ValueError(f'dtype ({dtype!r}) must be None or "bfloat16" (for numpy uint16 arrays holding bfloat16)')


def threads_arg(threads):
    if isinstance(threads, bool) or not isinstance(threads, int):
        raise TypeError(f"threads: expected an int, got {type(threads).__name__}")
    return threads


def empty_like(x, name):
    """An uninitialised output with x's shape, dtype and (for dense x) strides."""
    if isinstance(x, np.ndarray):
        return np.empty_like(x)
    if is_tensor(x):
        return torch_module().empty_like(x)
    raise TypeError(f"{name}: expected a torch.Tensor or a numpy.ndarray, got {type(x).__name__}")
