"""Layer 1, the kernels: one kernel set per backend, one function per phase
of the paper (``protocol.KernelSet`` lists them with shapes and dtypes).

``get_kernels("cpu")`` gives the numba set; ``get_kernels("cuda")`` the CuPy
set (needs a GPU and the ``cuda`` extra).  ``available_backends()`` tells
which can run here.
"""
from __future__ import annotations

import functools


@functools.cache
def cuda_available() -> bool:
    """True when CuPy imports and sees at least one GPU."""
    try:
        import cupy

        return cupy.cuda.runtime.getDeviceCount() > 0
    except Exception:
        return False


def get_kernels(backend: str):
    """The kernel set of ``backend`` ("cpu" or "cuda")."""
    if backend == "cpu":
        from .cpu.kernel_set import CpuKernels

        return CpuKernels
    if backend == "cuda":
        if not cuda_available():
            raise RuntimeError(
                "backend='cuda' needs CuPy and a visible GPU; install the 'cuda' "
                "extra (pip install 'emst-dask[cuda]') or use backend='cpu'")
        from .cuda.kernel_set import CudaKernels

        return CudaKernels
    raise ValueError(f"unknown backend {backend!r}: expected 'auto', 'cpu' or 'cuda'")


def resolve_backend(backend: str, points=None) -> str:
    """Turn "auto" into "cuda" or "cpu" (CuPy input always means "cuda")."""
    if backend != "auto":
        return backend
    if points is not None and type(points).__module__.startswith("cupy"):
        return "cuda"
    return "cuda" if cuda_available() else "cpu"


def device_memory(backend: str = "auto") -> int | None:
    """Total bytes of this process's GPU when ``backend`` resolves to
    "cuda" and one is visible, else None (the memory a partitioned job
    sizes its boxes by on a GPU worker)."""
    if resolve_backend(backend) == "cuda" and cuda_available():
        import cupy

        return int(cupy.cuda.Device().mem_info[1])
    return None
