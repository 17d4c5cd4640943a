"""Sums on the device that keep float32 subnormals.

CuPy's reductions may flush float32 subnormal operands to zero (the
conversion to float64 included), so a tree of weights near 1e-38 would
sum to 0.  Here each float32 is widened from its bits (integer and float64
arithmetic only, which no flush touches), then summed in float64: one
pass, no (n,) float64 temporary.
"""
from __future__ import annotations

import functools

_WIDEN = r"""
__device__ double widen(float x) {
    unsigned int b = __float_as_uint(x);
    int e = (int)((b >> 23) & 0xffu);
    unsigned int m = b & 0x7fffffu;
    double v = e ? ldexp((double)(m | 0x800000u), e - 150) : ldexp((double)m, -149);
    return (b >> 31) ? -v : v;
}
"""


@functools.lru_cache(maxsize=None)
def _sum_f32():
    import cupy

    return cupy.ReductionKernel("float32 x", "float64 y", "widen(x)", "a + b", "y = a", "0",
                                "emst_sum_f32_as_f64", preamble=_WIDEN)


def sum_float64(w) -> float:
    """The sum of the (m,) float32 or float64 cupy array ``w``, accumulated in
    float64 on the device (float32 subnormals kept)."""
    import numpy as np

    if w.dtype == np.float32:
        return float(_sum_f32()(w))
    return float(w.sum(dtype=np.float64))
