"""torch's CPU threads and the BLAS under it, set together.

Debian's torch calls the system libblas.so.3. With libopenblas0-pthread installed (setup.sh does)
that is OpenBLAS, about 10x faster than the reference BLAS for the training matmuls, but it keeps
its own thread pool, sized to the machine, which torch.set_num_threads does not reach. Setting
both makes `--threads N` mean N threads everywhere (and a run's bytes depend on N only)."""
import ctypes
import ctypes.util

import torch


def set_threads(threads: int) -> None:
    torch.set_num_threads(threads)
    for name in ("libblas.so.3", ctypes.util.find_library("openblas")):
        if not name:
            continue
        try:
            lib = ctypes.CDLL(name)
        except OSError:
            continue
        setter = getattr(lib, "openblas_set_num_threads", None)
        if setter is not None:
            setter(ctypes.c_int(threads))
            return
