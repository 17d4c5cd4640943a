"""Phase 1 of the partitioned EMST: each box on its own, no communication.

A box's worker runs the single-device engine on the box's points, then the
local certificate (``certificate``) over the box's MST edges: the
certified edges are final global MST edges; the rest of the box's MST are
candidates for phase 2, and the components of the certified edges are the
box's *super-vertices* (labelled by a global id), which hug the shared
faces.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np

from ..arrays import array_module, is_device_array, to_host
from ..engine import boruvka
from ..engine.order import strict_edge_order
from ..engine.scaling import bit_range, rescale_exact
from ..kernels import get_kernels
from .boxes import Walls, certificate_distances
from .certificate import boruvka_certificate, kruskal_certificate
from .edges import Edges, take


@dataclass
class BoxResult:
    """Phase 1 output of one box (global ids).

    The super-vertex of point i is the global id ``gids[label_rows[i]]``
    (its root's); phase 2 needs it for the shell only, so the per-point
    labels stay local (int32 where they fit: half the bytes, no gather of
    the whole box) and where the engine ran.  On a GPU worker the certified
    edges stay on the device too, for the output phase to write from there
    (``steps.certified_edges`` brings them to the host).
    """

    certified: Edges          # final global MST edges (numpy or cupy arrays)
    uncertified: Edges        # the rest of MST(box): candidates (numpy)
    label_rows: np.ndarray    # (n_box,) int32/int64 box row of each point's root
    gids: np.ndarray          # (n_box,) int64 the box's global ids (shared;
                              # on the device where the box was assembled there)
    max_local2: float         # longest squared edge of MST(box)
    n_super: int = 1          # distinct super-vertices
    seconds: dict = field(default_factory=dict)  # per step: engine (and
                              # engine.<phase>), order, certificate, edges

    def super_labels_of(self, idx) -> np.ndarray:
        """(len(idx),) int64 numpy super-vertex (a global id) of box rows
        ``idx`` (numpy; the rows' labels gathered where they are)."""
        rows = self.label_rows
        if is_device_array(rows):
            at = rows[array_module(rows).asarray(idx)]
            if is_device_array(self.gids):
                return self.gids[at].get()
            return self.gids[at.get()]
        return self.gids[rows[idx]]

    @property
    def super_labels(self) -> np.ndarray:
        """(n_box,) int64 numpy super-vertex (a global id) of every point."""
        if is_device_array(self.gids):
            return to_host(self.gids[self.label_rows])
        return take(self.gids, to_host(self.label_rows))


def solve_box(points, gids, face, backend="cpu", min_samples=1, core=None,
              certificate="auto", period=None) -> BoxResult:
    """Phase 1 on one box: certified edges, the rest of its MST, super-vertices.

    points : (m, d) float, the box's points, ``gids`` (m,) int64 ascending
    (so the engine's tie order on local indices is the global one); numpy,
    or CuPy arrays of a box assembled on the device.
    face : the box's ``boxes.Walls`` (the face distances are computed where
    the engine has the points: a GPU's box never sends them over), or (m,)
    float64 face distances (``face_distances``) where the points are.
    core : (m,) squared core distances (mutual reachability) or None.
    period : (d,) float64 lengths of a periodic box (minimum-image
    distances; a face on the global boundary counts in ``face``), or None.

    The box's MST comes from the single-device engine on any backend; the
    certificate runs where the edges are, in the engine's scaled units (so
    nothing underflows): ``kruskal_certificate`` (numba) on the CPU,
    ``boruvka_certificate`` (whole-array CuPy operations) on the GPU
    (``certificate`` = "kruskal" or "boruvka" picks one; for the tests).
    """
    m, d = points.shape
    dt = points.dtype
    if m == 0:
        e = Edges.empty(dt)
        return BoxResult(e, e, np.zeros(0, np.int32), np.asarray(to_host(gids), np.int64),
                         0.0, 0, {})
    if m == 1:
        e = Edges.empty(dt)
        return BoxResult(e, e, np.zeros(1, np.int32), np.asarray(to_host(gids), np.int64),
                         0.0, 1, {})
    t0 = time.perf_counter()
    K = get_kernels(backend)
    xp = K.xp
    pts = K.to_device(points)
    res = boruvka(K, pts, min_samples, box_size=period,
                  core_distances2=None if core is None else xp.asarray(core))
    s, t, w2s = res.source, res.target, res.weight2
    K.synchronize()
    t1 = time.perf_counter()
    if isinstance(face, Walls):
        alone = not face.any  # no shared face: the box's MST is final
        face = None if alone else face.distances(pts)
    else:
        alone = not bool(array_module(face).isfinite(face).any())
    del pts  # the certificate's arrays take its place
    t_order = 0.0
    if alone:
        certified = None
        labels = xp.zeros(m, xp.int64)
        n_super = 1
    else:
        # on the device: a flushed subnormal only lowers a bound (still safe)
        safe = xp.ldexp(certificate_distances(K.to_device(face), dt, d).astype(xp.float64),
                        res.exponent)
        with np.errstate(over="ignore"):  # no face: +inf, certifies anything
            safe2 = safe * safe + 0.0     # (+ 0.0: no negative zero)
        del safe
        if certificate == "auto":
            certificate = "kruskal" if xp is np else "boruvka"
        if certificate == "kruskal":
            order = strict_edge_order(xp, s, t, w2s)
            K.synchronize()
            t_order = time.perf_counter() - t1
            order = K.to_host(order)
            s, t = K.to_host(s), K.to_host(t)
            certified, labels = kruskal_certificate(order, s, t,
                                                    K.to_host(w2s.astype(xp.float64)),
                                                    K.to_host(safe2))
            certified, labels = xp.asarray(certified), xp.asarray(labels)
            s, t = xp.asarray(s), xp.asarray(t)
        else:  # no order of the box's edges: round 1 finds each point's minimum
            certified, labels = boruvka_certificate(xp, s, t, w2s, safe2, m)
        n_super = int(xp.count_nonzero(labels == xp.arange(m)))  # roots label themselves
    K.synchronize()
    t2 = time.perf_counter()
    cert, rest, label_rows, max2 = box_edges(K, gids, s, t, w2s, certified, labels,
                                             res.exponent, dt)
    K.synchronize()  # the writer's copy streams do not wait for this one
    out = BoxResult(cert, rest, label_rows,
                    gids if is_device_array(gids) else np.asarray(gids, np.int64), max2, n_super)
    out.seconds = {"engine": t1 - t0, "order": t_order, "certificate": t2 - t1 - t_order,
                   "edges": time.perf_counter() - t2,
                   **{f"engine.{k}": v for k, v in res.timings.items()}}
    return out


def box_edges(K, gids, s, t, w2s, certified, labels, exponent: int, dtype):
    """A box's MST edges in global ids, where the kernel set ``K`` keeps them.

    The certified edges stay on the device (the output phase writes them
    from there): the box's global ids cross once and the edges' ends are
    gathered there; only the uncertified edges (phase 2's candidates, few)
    come to the host, with their ends' super-vertices.

    Parameters
    ----------
    K : kernel set (``xp``, ``to_device``, ``to_host``)
    gids : (m,) int64, the box's global ids, ascending (numpy, or already
        on the device)
    s, t : (m-1,) int64 of ``K.xp``, the box's MST edges in local rows
    w2s : (m-1,) float of ``K.xp``, their squared weights in the engine's
        frame (times ``2**exponent`` of the box's points)
    certified : (m-1,) bool of ``K.xp``, or None (every edge certified)
    labels : (m,) int64 of ``K.xp``, the local row of each point's root
    exponent : int, the engine's scaling
    dtype : the box points' dtype, that of the squared weights returned

    Returns
    -------
    (certified Edges (ids and weights of ``K.xp``; weights numpy where only
    the host gives their exact bits), uncertified Edges (numpy),
    label_rows (m,) int32 (int64 beyond 2**31 points) of ``K.xp``,
    longest squared weight as float)
    """
    xp = K.xp
    m = labels.shape[0]
    z = np.zeros(0, np.int64)
    gd = gids if is_device_array(gids) else K.to_device(np.ascontiguousarray(gids, np.int64))

    def squares(w):  # the job's frame, the host's bits (``rescale_exact``)
        return rescale_exact(xp, w, -2 * exponent, dtype, K.to_host)

    label_rows = labels.astype(xp.int32) if m < 2**31 else labels
    if certified is None:
        cert = Edges(_gather(xp, gd, s), _gather(xp, gd, t), squares(w2s), z, z.copy())
        rest = Edges.empty(dtype)
    else:
        cert = Edges(_gather(xp, gd, s[certified]), _gather(xp, gd, t[certified]),
                     squares(w2s[certified]), z, z.copy())
        nc = xp.flatnonzero(~certified)
        ns, nt = s[nc], t[nc]
        to = K.to_host
        rest = Edges(to(gd[ns]), to(gd[nt]), np.asarray(to(squares(w2s[nc]))),
                     to(gd[label_rows[ns]]), to(gd[label_rows[nt]]))
    top = bit_range(xp, w2s)[1] or 0.0
    max2 = float(rescale_exact(np, np.array([top], w2s.dtype), -2 * exponent, dtype)[0])
    return cert, rest, label_rows, max2


def _gather(xp, values, idx):
    """``values[idx]`` (in parallel on the host)."""
    return take(values, idx) if xp is np else values[idx]


def run_engine(points, backend, min_samples, core=None, period=None):
    """The single-device engine on one point set.

    Parameters
    ----------
    points : (m, d) float numpy array
    backend : {"cpu", "cuda"}
    min_samples : int
    core : (m,) squared core distances, optional
    period : (d,) float64 lengths of a periodic box, optional

    Returns
    -------
    (source, target, w2): (m-1,) int64 local rows and squared weights in
    input units, on the host.
    """
    K, res = _engine(points, backend, min_samples, core, period)
    to = K.to_host
    w2 = to(res.weight2)
    if res.exponent:
        w2 = np.ldexp(w2.astype(np.float64), -2 * res.exponent)
    return to(res.source), to(res.target), w2.astype(points.dtype, copy=False)


def run_engine_device(points, backend, min_samples, core=None, period=None):
    """``run_engine`` with its output kept where the engine ran.

    Parameters
    ----------
    points : (m, d) float numpy array (or an array of the backend's ``xp``)
    backend : {"cpu", "cuda"}
    min_samples : int
    core : (m,) squared core distances, optional
    period : (d,) float64 lengths of a periodic box, optional

    Returns
    -------
    (K, source, target, w2): the kernel set, and (m-1,) int64 local rows and
    squared weights in input units (``points``' dtype), arrays of ``K.xp``
    with the bits ``run_engine`` gives (``rescale_exact``: the rare weights
    the device cannot convert exactly go through the host and back).
    """
    K, res = _engine(points, backend, min_samples, core, period)
    w2 = rescale_exact(K.xp, res.weight2, -2 * res.exponent, points.dtype, K.to_host)
    return K, res.source, res.target, K.to_device(w2)


def _engine(points, backend, min_samples, core, period):
    K = get_kernels(backend)
    pts = K.to_device(points)
    res = boruvka(K, pts, min_samples, box_size=period,
                  core_distances2=None if core is None else K.to_device(core))
    return K, res
