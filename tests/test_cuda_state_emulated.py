"""The CUDA Borůvka state between iterations, on the emulated kernels,
against brute force.

Each point holds one word (``s.cl``): ``~j`` for a certified candidate j,
which must be its exact nearest point in another component under
(weight, input row), or the bits of a lower bound on its distance to
every point of another component.  The word replaces a candidate array
and a lower-bound array: a candidate's lower bound is its weight, put
back when the candidate joins the point's component.
"""
from __future__ import annotations

import numpy as np
import pytest

from emst_dask import engine

cuda_emu = pytest.importorskip("cuda_emu")
K = cuda_emu.emulated_kernels()
if K is None:  # pragma: no cover - no C++ compiler
    pytest.skip("no C++ compiler for the emulated CUDA kernels", allow_module_level=True)


def _labels_and_points(bvh):
    """(labels, coordinates) of the point records, tree order."""
    n, d = bvh.n, bvh.d
    rec = bvh.P.reshape(n, bvh.pt_bytes)
    it = bvh.dtype.itemsize
    x = rec[:, :d * it].copy().view(bvh.dtype).reshape(n, d)
    lab = rec[:, d * it:d * it + 4].copy().view(np.int32).ravel()
    return lab, x


def _check_words(bvh, s, core2, phase):
    lab, x = _labels_and_points(bvh)
    orig = np.asarray(bvh.orig)
    dt = bvh.dtype
    # the kernels' weights: squared differences summed axis by axis, in dt
    w = np.zeros((bvh.n, bvh.n), dt)
    for a in range(bvh.d):
        t = (x[:, None, a] - x[None, :, a]).astype(dt)
        w = (w + t * t).astype(dt)
    if core2 is not None:
        w = np.maximum(w, np.maximum(core2[:, None], core2[None, :]))
    foreign = lab[:, None] != lab[None, :]
    wf = np.where(foreign, w, np.inf)
    nearest = wf.min(axis=1)
    words = np.asarray(s.cl)
    cand = words < 0
    for i in np.flatnonzero(cand):
        j = ~int(words[i])
        tie = np.flatnonzero(wf[i] == nearest[i])
        assert lab[j] != lab[i], (phase, i)
        assert w[i, j] == nearest[i] and orig[j] == orig[tie].min(), (phase, i)
    lower = words[~cand].astype(np.int64 if dt == np.float64 else np.int32).view(dt)
    assert (lower >= 0).all(), phase
    assert (lower <= nearest[~cand]).all(), phase
    return int(cand.sum()), int((~cand).sum())


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("cloud", ["uniform", "lattice", "mrd"])
def test_candidates_exact_and_bounds_below_the_nearest_foreign_point(cloud, dtype):
    rng = np.random.default_rng(7)
    if cloud == "lattice":  # ties everywhere, every site twice
        g = rng.integers(0, 9, size=(300, 3)).astype(dtype)
        x = np.concatenate([g, g[:150]])
    else:
        x = rng.random((700, 3)).astype(dtype)
    ms = 5 if cloud == "mrd" else 1
    bvh = engine.construct_bvh(K, x, engine.Timers(enabled=False))
    core2 = K.compute_core_distances(bvh, ms) if ms > 1 else None
    s = K.init_boruvka(bvh, core2, ms > 1)
    assert bvh.delta is None  # construction only: the label walk reads the splits
    n, edges, checked = bvh.n, 0, 0
    seen = np.zeros(2, np.int64)  # candidates, bounds
    while edges < n - 1:
        K.reduce_labels(bvh, s)
        K.compute_upper_bounds(bvh, s)  # joined candidates become bounds again
        if s.it > 0:
            seen += _check_words(bvh, s, core2, ("bounds", s.it))
        K.find_component_outgoing_edges(bvh, s)
        K.reduce_component_minima(bvh, s)  # raises the bounds to the radii
        seen += _check_words(bvh, s, core2, ("minima", s.it))
        checked += 1
        edges = K.merge_components(bvh, s)
    assert checked >= 3 and (seen > 0).all(), seen
    src, dst, w2 = K.finalize_edges(bvh, s)
    assert src.shape[0] == n - 1
