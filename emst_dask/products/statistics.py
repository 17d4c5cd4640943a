"""MST statistics as MiSTree defines them (Naidoo et al. 2020).

From a tree's edges: the *degree* of every node, the *edge lengths*, and
per *branch* (a chain of edges through degree-2 nodes, ``branches``) its
length (the sum of its edges' lengths), its edge count and its *shape*
``s``: the distance between its two end nodes over its length (in a
periodic box the end-to-end distance is taken under the minimum image: per
axis ``dx = min(|a - b|, L - |a - b|)``).  Histograms follow MiSTree's
``HistMST`` defaults (degree in bins of width 1 from 0.5 to 6.5; 100 bins
of edge and of branch length from 0 to 1.05 times the largest; the shape
as ``sqrt(1 - s)`` in 50 bins over [0, 1]; normalised), and ``plot``
draws the four panels.

``mst_statistics`` runs the numba kernels on numpy edges and the
whole-array version (``mst_statistics_xp``) on CuPy edges.
"""
from __future__ import annotations

import itertools
import numbers
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..errors import InputError
from ..io.checks import check_box_size as io_check_box_size
from ..io.checks import check_in_box
from .branches import branches_host
from .histograms import (Histogram, MSTHistograms, _binned, _linear_range,  # noqa: F401
                         _log_binned)
from .branches_xp import branches_xp
from .order import check_count, check_edges
from ..arrays import to_host as _host


# ----------------------------------------------------------------------------
# checks


def check_box_size(box_size, d: int | None = None):
    """The lengths of a periodic box, checked (``emst_dask.io.checks.check_box_size``).

    Parameters
    ----------
    box_size : float, or sequence of d floats, or None
    d : int, optional; the number of coordinates (None: as many as given).

    Returns
    -------
    (d,) float64 numpy array, or None for None.
    """
    if hasattr(box_size, "__cuda_array_interface__") and not isinstance(box_size, np.ndarray):
        box_size = box_size.get()
    if box_size is None:
        return None
    if d is None:
        try:
            d = max(1, int(np.size(box_size)))
        except (TypeError, ValueError):
            d = 1
    return io_check_box_size(box_size, d)


def check_points(xp, points, n: int, box=None):
    """The points of a tree's nodes, checked: (n, d), real, finite, and in
    [0, L) per axis when there is a box.

    Parameters
    ----------
    xp : numpy or cupy, the module of the tree's arrays.
    points : (n, d) array (numpy or of ``xp``).
    n : int, the number of nodes.
    box : (d,) float64 or None.

    Returns
    -------
    (n, d) float array of ``xp`` (float32 and float64 kept, others float64).

    Raises
    ------
    InputError
        Another shape or count, non-finite coordinates (with the row), or a
        point outside the box (with the row and axis).
    """
    pts = xp.asarray(points)
    if pts.ndim == 1 and n > 0 and pts.shape[0] == n:
        pts = pts.reshape(n, 1)
    if pts.ndim != 2:
        raise InputError(f"points must be an (n, d) array; got shape {tuple(pts.shape)}")
    if pts.shape[0] != n:
        raise InputError(f"the tree has {n} points but points has {pts.shape[0]} rows")
    if pts.dtype.kind not in "iuf":
        raise InputError(f"points must hold real numbers; got {pts.dtype}")
    if pts.dtype not in (np.float32, np.float64):
        pts = pts.astype(np.float64)
    if box is not None and box.shape[0] != pts.shape[1]:
        raise InputError(f"box_size has {box.shape[0]} lengths for {pts.shape[1]}-D points")
    pts = xp.ascontiguousarray(pts)
    if xp is not np and n:
        from ..kernels.cuda.input_checks import points_ok

        if points_ok(pts, box):  # one pass; the checks below only for the message
            return pts
    if n:
        bad = ~xp.isfinite(pts).all(axis=1)
        if bool(bad.any()):
            row = int(xp.flatnonzero(bad)[0])
            raise InputError(f"points row {row} is not finite: {_host(pts[row]).tolist()}")
    if box is not None:
        check_in_box(pts, box)
    return pts


# ----------------------------------------------------------------------------
# the statistics


@dataclass
class MSTStatistics:
    """The MST statistics of a tree (MiSTree's definitions).

    Attributes
    ----------
    degree : (n,) int64, edges at each node.
    edge_length : (m,) float32 or float64, the edge weights (m = n - 1).
    branch_length : (B,) float64, each branch's summed edge lengths (in
        float64, along the branch from its first edge).
    branch_shape : (B,) float64 or None, end-to-end distance over length
        (minimum image in a periodic box); NaN for a branch of length 0;
        None when no points were given.
    branch_edge_count : (B,) int64, edges per branch (>= 2).
    branch_edges : (q,) int64, the branches' edge ids, branch after branch,
        each in order along the branch from its first edge (the end edge
        with the smaller id, MiSTree's order).
    branch_offsets : (B+1,) int64, branch k is
        ``branch_edges[branch_offsets[k]:branch_offsets[k+1]]``; branches
        are ordered by their first edge, as MiSTree lists them.
    branch_ends : (B, 2) int64, the end nodes (degree != 2) of each branch,
        that of its first edge first (MiSTree's ``get_branch_end_index``,
        transposed).
    n_points : int.
    box_size : (d,) float64 or None, the periodic box the shapes used.

    Arrays are numpy, or cupy when the tree's are.
    """

    degree: Any
    edge_length: Any
    branch_length: Any
    branch_shape: Any
    branch_edge_count: Any
    branch_edges: Any
    branch_offsets: Any
    branch_ends: Any
    n_points: int
    box_size: Any = None

    @property
    def n_branches(self) -> int:
        """Number of branches, B."""
        return int(self.branch_length.shape[0])

    def branch_index(self) -> list:
        """The branches as MiSTree's ``get_branch_index`` lists them: a list of
        B lists of edge ids (Python ints)."""
        edges = _host(self.branch_edges).tolist()
        off = _host(self.branch_offsets).tolist()
        return [edges[a:b] for a, b in itertools.pairwise(off)]

    def to_numpy(self) -> "MSTStatistics":
        """These statistics with numpy arrays."""
        return MSTStatistics(*(_host(getattr(self, f)) for f in (
            "degree", "edge_length", "branch_length", "branch_shape", "branch_edge_count",
            "branch_edges", "branch_offsets", "branch_ends")), self.n_points, self.box_size)

    def summary(self) -> dict:
        """Counts and means: ``n``, ``edges``, ``branches``, ``mean_degree``,
        ``mean_edge_length``, ``mean_branch_length``, ``mean_branch_edges``,
        ``mean_branch_shape`` (NaN where there is nothing to average or no
        shape; shapes of length-0 branches left out)."""
        h = self.to_numpy()

        def mean(a):
            a = np.asarray(a, np.float64)
            a = a[~np.isnan(a)]
            return float(a.mean()) if len(a) else float("nan")

        return {"n": int(self.n_points), "edges": int(len(h.edge_length)),
                "branches": self.n_branches, "mean_degree": mean(h.degree),
                "mean_edge_length": mean(h.edge_length),
                "mean_branch_length": mean(h.branch_length),
                "mean_branch_edges": mean(h.branch_edge_count),
                "mean_branch_shape": mean(h.branch_shape) if h.branch_shape is not None
                else float("nan")}

    def histograms(self, *, uselog: bool = False, use_sqrt_s: bool = True,
                   density: bool = True, d_range=(0.5, 6.5), d_bins: int = 6,
                   l_range=None, l_bins: int = 100, b_range=None, b_bins: int = 100,
                   s_range=(0.0, 1.0), s_bins: int = 50) -> MSTHistograms:
        """The four histograms with MiSTree's default binning (``HistMST``).

        Parameters
        ----------
        uselog : bool
            Bin the lengths in log10 (MiSTree's ``uselog``).
        use_sqrt_s : bool
            Bin the shape as ``sqrt(1 - s)`` (MiSTree's ``use_sqrt_s``).
        density : bool
            Normalised histograms (MiSTree's ``usenorm``), else counts.
        d_range, d_bins : the degree's range and bin count (bins of 1).
        l_range, b_range : (lo, hi) of the edge and branch lengths; default
            (0, 1.05 max), or with ``uselog`` (0.95 min, 1.05 max) of the
            positive lengths, as MiSTree.
        l_bins, b_bins, s_bins : bin counts.
        s_range : the range of the binned shape.

        Returns
        -------
        MSTHistograms
            Equal to MiSTree's ``HistMST().setup(...)`` then ``get_hist`` on
            the same statistics (``as_mistree()`` gives its dictionary).
            Empty statistics (n <= 2) bin over [0, 1].
        """
        h = self.to_numpy()
        with np.errstate(invalid="ignore", divide="ignore"):
            d = _binned(h.degree, d_range[0], d_range[1], d_bins, density)
            if uselog:
                lh = _log_binned(h.edge_length, l_range, l_bins, density)
                bh = _log_binned(h.branch_length, b_range, b_bins, density)
            else:
                lh = _binned(h.edge_length, *_linear_range(h.edge_length, l_range), l_bins,
                             density)
                bh = _binned(h.branch_length, *_linear_range(h.branch_length, b_range), b_bins,
                             density)
            sh = None
            if h.branch_shape is not None:
                s = np.sqrt(1.0 - h.branch_shape) if use_sqrt_s else h.branch_shape
                sh = _binned(s, s_range[0], s_range[1], s_bins, density)
        return MSTHistograms(d, lh, bh, sh, bool(uselog), bool(use_sqrt_s), bool(density))

    def plot(self, path_or_ax=None, *, histograms: MSTHistograms | None = None,
             label: str | None = None, title: str | None = None):
        """Draw the four histograms (degree, edge length, branch length,
        branch shape) side by side, as MiSTree's ``PlotHistMST``.

        Parameters
        ----------
        path_or_ax : None, a path (.png, .pdf or .svg) or ``io.output.Output``,
            or a sequence of four matplotlib Axes
            None: return a new Figure; a path: write the picture there and
            return its path (``io.picture``: an existing file is refused);
            axes: draw into them and return them.
        histograms : MSTHistograms, optional (default: ``self.histograms()``).
        label : str, optional, the legend label of the curves.
        title : str, optional, the figure's title (default: a summary).
        """
        hs = histograms or self.histograms()
        to_file = path_or_ax is not None and not _is_axes_list(path_or_ax)
        if to_file:
            from ..io.picture import resolve_picture, save

            path_or_ax = resolve_picture(path_or_ax)
        if path_or_ax is None or to_file:
            from matplotlib.figure import Figure  # no pyplot: no backend is chosen

            fig = Figure(figsize=(16, 4.2), layout="constrained")
            axes = fig.subplots(1, 4)
        else:
            axes = list(path_or_ax)
            fig = axes[0].figure
        ylabel = r"$\bar{N}$" if hs.density else r"$N$"
        panels = [(hs.degree, r"$d$ (degree)"),
                  (hs.edge_length, r"$l$ (edge length)"),
                  (hs.branch_length, r"$b$ (branch length)"),
                  (hs.branch_shape, r"$\sqrt{1-s}$ (branch shape)" if hs.use_sqrt_s
                   else r"$s$ (branch shape)")]
        for ax, (h, xlabel) in zip(axes, panels):
            ax.set_xlabel(xlabel)
            ax.set_ylabel(ylabel)
            if h is None:
                ax.text(0.5, 0.5, "no points given:\nthe shape needs them", ha="center",
                        va="center", transform=ax.transAxes)
                continue
            ax.stairs(np.nan_to_num(h.values), h.edges, color="C0", linewidth=1.2, label=label)
            if hs.uselog and h is not hs.degree and h is not hs.branch_shape:
                ax.set_xscale("log")
        if label:
            axes[0].legend(loc="upper right", fontsize=9)
        if path_or_ax is None or to_file:
            sm = self.summary()
            fig.suptitle(title or (
                f"MST statistics: n={sm['n']}, {sm['branches']} branches, mean degree "
                f"{sm['mean_degree']:.4g}, mean edge length {sm['mean_edge_length']:.4g}"
                + (" (periodic box)" if self.box_size is not None else "")), fontsize=11)
        if to_file:
            return save(fig, path_or_ax)
        return fig if path_or_ax is None else axes


def _is_axes_list(x) -> bool:
    try:
        from matplotlib.axes import Axes
    except ImportError:  # pragma: no cover
        return False
    try:
        items = list(x) if not isinstance(x, (str, bytes)) else []
    except TypeError:
        return False
    if hasattr(x, "__fspath__"):
        return False
    if items and all(isinstance(a, Axes) for a in items):
        if len(items) != 4:
            raise InputError(f"plot draws four panels; got {len(items)} axes")
        return True
    return False


def mst_statistics(source, target, weight, n, points=None, box_size=None) -> MSTStatistics:
    """Degree, edge length, branch length, edge count and shape of a tree.

    Parameters
    ----------
    source, target : (n-1,) integer arrays (numpy or cupy), the tree's edges
        (any edge list whose degree-2 nodes lie on no cycle).
    weight : (n-1,) float array, the edge lengths.
    n : int, the number of points.
    points : (n, d) float array, optional; the branch shapes need it (the
        points the tree was computed from, rows in the same order).
    box_size : float or (d,) floats, optional; the periodic box: end-to-end
        distances under the minimum image; points must lie in [0, L).

    Returns
    -------
    MSTStatistics (numpy arrays for numpy edges, cupy for cupy: computed by
    ``branches_host`` or ``branches_xp``).

    Raises
    ------
    InputError
        A bad edge list, count, box (wrong number of lengths, <= 0) or
        points (another count, outside the box), before any work.
    """
    n = check_count(n)
    xp, s, t, w = check_edges(source, target, weight, n)
    pts, box = _checked_inputs(xp, points, box_size, n)
    return statistics_of_checked(xp, s, t, w, n, pts, box)


def statistics_of_checked(xp, s, t, w, n, points, box) -> MSTStatistics:
    """``mst_statistics`` of checked input (``check_edges``' arrays,
    ``check_points``' points or None, ``check_box_size``'s box or None):
    what ``SpanningTree.statistics`` calls after its own checks."""
    if xp is np:
        r = branches_host(s, t, w, n, points, box)
    else:
        r = branches_xp(xp, s, t, w, n, points, box)
    return _assemble(xp, r, w, n, box)


def mst_statistics_xp(xp, source, target, weight, n, points=None, box_size=None):
    """``mst_statistics`` with whole-array operations of ``xp`` (the device
    algorithm, ``branches_xp``, run with numpy or cupy).

    Parameters and returns as ``mst_statistics``, arrays of ``xp``.
    """
    n = check_count(n)
    _, s, t, w = check_edges(source, target, weight, n)
    pts, box = _checked_inputs(xp, points, box_size, n)
    return _assemble(xp, branches_xp(xp, s, t, w, n, pts, box), w, n, box)


def _checked_inputs(xp, points, box_size, n):
    """Checked points (of ``xp``) and box lengths."""
    d = None
    if points is not None:
        shape = getattr(points, "shape", None) or np.shape(points)
        d = shape[1] if len(shape) == 2 else 1
    if isinstance(box_size, numbers.Real) and not isinstance(box_size, bool) and d is None:
        d = 1
    box = check_box_size(box_size, d)
    pts = check_points(xp, points, n, box) if points is not None else None
    return pts, box


def _assemble(xp, r, w, n, box) -> MSTStatistics:
    offsets = r["branch_offsets"]
    length = r["branch_length"]
    shape = None
    if r["branch_reach"] is not None:
        with np.errstate(invalid="ignore", divide="ignore"):
            shape = r["branch_reach"] / length
    return MSTStatistics(degree=r["degree"], edge_length=w, branch_length=length,
                         branch_shape=shape, branch_edge_count=offsets[1:] - offsets[:-1],
                         branch_edges=r["branch_edges"], branch_offsets=offsets,
                         branch_ends=r["branch_ends"], n_points=n, box_size=box)


__all__ = ["mst_statistics", "mst_statistics_xp", "MSTStatistics", "MSTHistograms",
           "Histogram", "check_box_size", "check_points"]
