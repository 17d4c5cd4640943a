"""CUDA check of a tree's recorded weights against its points
(``products.tree_checks``): one elementwise pass over the edges, nothing
copied to the host."""
from __future__ import annotations

import functools

#: flags of ``weight_flags``
FLAG_OK, FLAG_WEIGHT, FLAG_ROW = 0, 1, 2


@functools.cache
def _kernel(xp):
    # xp: cupy, or a stand-in with cupy's ElementwiseKernel (the tests' emulator)
    return xp.ElementwiseKernel(
        "raw P pts, S s, S t, W w, raw float64 box, int64 nrows, int32 d, int32 periodic, "
        "float64 rtol",
        "int8 flag",
        """
        if (s < 0 || s >= nrows || t < 0 || t >= nrows) {
            flag = 2;
        } else {
            long long a = (long long)s * d, b = (long long)t * d;
            double sq = 0.0;
            for (int j = 0; j < d; ++j) {
                double x = fabs((double)pts[a + j] - (double)pts[b + j]);
                if (periodic) {
                    double y = box[j] - x;
                    x = y < x ? y : x;
                }
                sq += x * x;
            }
            double got = sqrt(sq);
            double ww = (double)w;
            double big = fabs(ww) > fabs(got) ? fabs(ww) : fabs(got);
            flag = fabs(got - ww) > rtol * big ? 1 : 0;
        }
        """, "emst_tree_weight_flags")


def weight_flags(xp, points, s, t, w, box, rtol):
    """Per edge: ``FLAG_ROW`` for an end outside [0, n), ``FLAG_WEIGHT`` for a
    recorded weight ``w`` that differs from the ends' (minimum-image)
    distance by more than ``rtol`` relative, else ``FLAG_OK``.

    Parameters
    ----------
    xp : cupy.
    points : (n, d) float32/float64 C-contiguous device array.
    s, t : (k,) integer device arrays of one dtype; w : (k,) float device array.
    box : (d,) float64 device array, or None (open space).
    rtol : float.

    Returns
    -------
    (k,) int8 device array.
    """
    n, d = points.shape
    periodic = box is not None
    if not periodic:
        box = xp.zeros(d, xp.float64)
    return _kernel(xp)(points, s, t, w, box, xp.int64(n), xp.int32(d), xp.int32(periodic),
                       xp.float64(rtol))
