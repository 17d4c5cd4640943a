"""Connected components of edge lists on the GPU: a lock-free union-find.

The friends-of-friends cuts (``products.cuts``) add the tree's edges to one
union-find, lightest lengths first, and read the groups after each length.
Each edge hooks the larger of its endpoints' roots under the smaller with a
compare-and-swap, so every root is its component's smallest row and the
groups come out numbered by their smallest row, as on the host.
"""
from __future__ import annotations

import functools
from pathlib import Path

import numpy as np

_THREADS = 256


@functools.cache
def _module():
    import cupy

    code = Path(__file__).with_name("union_find.cu").read_text()
    return cupy.RawModule(code=code, options=("-std=c++14",),
                          name_expressions=("uf_hook<float>", "uf_hook<double>"))


def _grid(count: int) -> tuple:
    import cupy

    sms = cupy.cuda.Device().attributes["MultiProcessorCount"]
    return (max(1, min(-(-count // _THREADS), 32 * sms)),)


class DeviceUnionFind:
    """A union-find over n rows on the current GPU.

    Parameters
    ----------
    n : int, the number of rows (points).
    """

    def __init__(self, n: int):
        import cupy

        self.n = int(n)
        self.parent = cupy.arange(self.n, dtype=cupy.int64)

    def hook(self, source, target, weight, lo: float, hi: float) -> None:
        """Join the endpoints of the edges whose weight lies in (lo, hi].

        Parameters
        ----------
        source, target : (m,) int64 cupy arrays, C-contiguous, in [0, n).
        weight : (m,) float32 or float64 cupy array, C-contiguous.
        lo, hi : float, compared with the weights in float64 (exactly).
        """
        m = int(source.shape[0])
        if m == 0:
            return
        name = "uf_hook<float>" if weight.dtype == np.float32 else "uf_hook<double>"
        _module().get_function(name)(
            _grid(m), (_THREADS,),
            (source, target, weight, np.float64(lo), np.float64(hi), self.parent,
             np.int64(m)))

    def labels(self, out=None):
        """(n,) int64 cupy: the components numbered 0, 1, ... by their
        smallest row (written into ``out`` when given)."""
        import cupy

        n = self.n
        out = cupy.empty(n, cupy.int64) if out is None else out
        if n == 0:
            return out
        is_root = cupy.empty(n, cupy.int64)
        _module().get_function("uf_flatten")(_grid(n), (_THREADS,),
                                             (self.parent, is_root, np.int64(n)))
        scan = cupy.cumsum(is_root, out=is_root)
        _module().get_function("uf_number")(_grid(n), (_THREADS,),
                                            (self.parent, scan, out, np.int64(n)))
        return out
