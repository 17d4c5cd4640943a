"""Pictures of a spanning tree (matplotlib, Agg backend).

``plot_tree(edges, points, out)`` draws two panels: the tree edges of a thin
slab in z (both ends inside it), projected onto x-y over the slab's points,
and the histogram of the edge lengths on logarithmic axes.
"""
from __future__ import annotations

import numpy as np

from ..errors import InputError
from ..io import open_edges, resolve_source
from ..io.paths import locations
from ..io.picture import resolve_picture
from ..io.picture import save as save_picture


def _check_slab(slab):
    if not 0 < slab <= 1:
        raise InputError(f"slab must lie in (0, 1] (a fraction of the z extent), got {slab!r}")


def slab_selection(pts: np.ndarray, slab: float = 0.02, max_points: int = 30_000,
                   axis: int = 2):
    """Rows in a slab |z - median z| <= slab * extent / 2, cropped in x-y to a
    square window of about ``max_points`` points around the slab's median.

    Parameters
    ----------
    pts : (n, d) float array
    slab : float
        The slab's thickness, a fraction of the extent along ``axis``.
    max_points : int
    axis : int
        The slab's axis (no slab when d <= axis).

    Returns
    -------
    mask : (n,) bool array
    description : str
        The selection in words.
    """
    n, d = pts.shape
    mask = np.ones(n, bool)
    parts = []
    if d > axis:
        z = pts[:, axis].astype(np.float64)
        zc = float(np.median(z))
        half = 0.5 * slab * float(z.max() - z.min())
        mask &= np.abs(z - zc) <= half
        parts.append(f"{zc - half:.4g} <= {'xyzw'[axis] if axis < 4 else axis} <= {zc + half:.4g}")
    count = int(mask.sum())
    if count > max_points and d >= 2:
        xy = pts[mask, :2].astype(np.float64)
        cx, cy = np.median(xy, axis=0)
        ext = float(np.max(xy.max(axis=0) - xy.min(axis=0)))
        # shrink the square until about max_points are left
        side = ext * np.sqrt(max_points / count)
        for _ in range(30):
            inside = (np.abs(xy[:, 0] - cx) <= side / 2) & (np.abs(xy[:, 1] - cy) <= side / 2)
            k = int(inside.sum())
            if k <= max_points * 1.1:
                break
            side *= 0.9 * np.sqrt(max_points / k)
        idx = np.flatnonzero(mask)
        mask[:] = False
        mask[idx[inside]] = True
        parts.append(f"x-y window {side:.3g} wide around ({cx:.3g}, {cy:.3g})")
    return mask, ", ".join(parts) or "all points"


def check_points_of(store, src, points, edges, ignore_input: bool = False):
    """Refuse points that are not the ones ``store``'s tree was computed from.

    The store records n, d and its input; a cloud with another n or d is
    refused always, one from another place (same n and d) unless
    ``ignore_input`` (the snapshot was moved, say).
    """
    a = store.attrs
    if a.get("n") is not None and int(a["n"]) != src.n:
        raise InputError(f"{points} has {src.n} points but the edge store {store.path} "
                         f"was computed from {a['n']}")
    if a.get("d") is not None and int(a["d"]) != src.d:
        raise InputError(f"{points} has {src.d} coordinates but the edge store {store.path} "
                         f"was computed from {a['d']}-D points")
    recorded = a.get("input") or ""
    is_place = recorded.startswith(("/", "file://")) or "://" in recorded
    if is_place and not ignore_input and src.describe() != recorded:
        raise InputError(f"{edges} was computed from {recorded}, not {src.describe()}; "
                         "pass the points it was computed from (or --ignore-input if they "
                         "were moved)")


def plot_tree(edges, points, out, *, columns=None, array=None, slab: float = 0.02,
              max_points: int = 30_000, title: str | None = None,
              ignore_input: bool = False, overwrite: bool = False) -> str:
    """Write the picture to ``out``; return a one-line summary.

    Parameters
    ----------
    edges : path of an edge store (Zarr or .npy)
    points : the source its tree was computed from (anything ``emst`` takes)
    out : path of the picture (.png, .pdf or .svg; ``io.picture``)
    columns, array : select the coordinates of a Zarr group
    slab : float
        Thickness of the drawn slab, as a fraction of the z extent.
    max_points : int
        The slab is cropped in x-y to about this many points.
    title : str, optional
    ignore_input : bool
        Accept points from another place than the store's recorded input
        (same n and d).
    overwrite : bool
        Replace a picture this package drew (never another file).
    """
    import matplotlib

    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt
    from matplotlib.collections import LineCollection

    picture = resolve_picture(out, overwrite, locations(edges, points))
    _check_slab(slab)
    store = open_edges(edges)
    tree = store.load()
    src = resolve_source(points, array=array, columns=columns)
    check_points_of(store, src, points, edges, ignore_input)
    pts = src.read_all()
    n, d = pts.shape
    s, t = tree.source, tree.target
    w = np.asarray(tree.weight, np.float64)
    if len(s) and (s.max() >= n or t.max() >= n):
        raise InputError(f"{edges} indexes rows beyond the {n} points of {points}")

    from matplotlib.colors import LogNorm

    pos = w[w > 0]
    zeros = int((w == 0).sum())
    lo, hi = (float(pos.min()), float(pos.max())) if len(pos) else (1.0, 10.0)
    if hi <= lo:
        hi = lo * 1.01
    norm = LogNorm(vmin=lo, vmax=hi)
    from matplotlib.colors import ListedColormap

    # viridis without its pale yellow end, which vanishes on white
    cmap = ListedColormap(plt.get_cmap("viridis")(np.linspace(0.0, 0.82, 256)))

    fig, (ax, axh) = plt.subplots(1, 2, figsize=(14, 6.8), layout="constrained",
                                  gridspec_kw={"width_ratios": [1.15, 1]})
    # -- the slab: tree edges with both ends in it, coloured by length
    if d >= 2:
        mask, where = slab_selection(pts, slab, max_points)
        keep = mask[s] & mask[t]
        seg = np.stack([pts[s[keep]][:, :2], pts[t[keep]][:, :2]], axis=1).astype(np.float64)
        sel = pts[mask]
        ax.scatter(sel[:, 0], sel[:, 1], s=1.2, c="0.45", linewidths=0, zorder=1)
        lw = 0.8 if len(seg) < 5_000 else 0.5
        wk = np.clip(w[keep], lo, hi)
        lc = LineCollection(seg, cmap=cmap, norm=norm, linewidths=lw, zorder=2)
        lc.set_array(wk)
        ax.add_collection(lc)
        if len(sel):
            lo2, hi2 = sel[:, :2].min(axis=0), sel[:, :2].max(axis=0)
            pad = 0.02 * max(float((hi2 - lo2).max()), 1e-12)
            ax.set_xlim(lo2[0] - pad, hi2[0] + pad)
            ax.set_ylim(lo2[1] - pad, hi2[1] + pad)
        ax.set_aspect("equal", adjustable="box")
        ax.set_xlabel("x")
        ax.set_ylabel("y")
        if d > 2:
            ax.set_title(f"{int(keep.sum())} tree edges among the {int(mask.sum())} points "
                         f"of the slab\n{where} (projected to x-y)", fontsize=10)
        else:
            ax.set_title(f"{int(keep.sum())} tree edges among {int(mask.sum())} points\n"
                         f"{where}", fontsize=10)
        fig.colorbar(lc, ax=ax, shrink=0.8, pad=0.02, label="edge length")
        drawn = f"{int(keep.sum())} edges of {int(mask.sum())} points in the slab"
    else:
        ax.plot(pts[:, 0], np.zeros(n), "|", ms=8)
        ax.set_title("1-D points", fontsize=10)
        drawn = "1-D cloud"
    # -- edge lengths, log-spaced bins on log axes, same colours
    if len(pos):
        bins = np.geomspace(lo, hi, 60)
        counts, edges_, patches = axh.hist(pos, bins=bins, edgecolor="white", linewidth=0.3)
        centres = np.sqrt(edges_[:-1] * edges_[1:])
        for c, p in zip(centres, patches):
            p.set_facecolor(cmap(norm(c)))
        axh.set_xscale("log")
        axh.set_yscale("log")
        med = float(np.median(w))
        if med > 0:
            axh.axvline(med, color="tab:red", lw=1, ls="--", label=f"median {med:.3g}")
            axh.legend(loc="upper right", fontsize=9)
    axh.set_xlabel("edge length" + (" (mutual reachability)"
                                    if (store.attrs.get("min_samples") or 1) > 1 else ""))
    axh.set_ylabel("edges per bin")
    axh.set_title(f"all {len(w)} edges, total length {float(w.sum()):.6g}"
                  + (f"; {zeros} of length 0 not shown" if zeros else ""), fontsize=10)
    fig.get_layout_engine().set(wspace=0.08)
    fig.suptitle(title or f"minimum spanning tree of {src.where} (n={n}, d={d})", fontsize=11)
    try:
        save_picture(fig, picture)
    finally:
        plt.close(fig)
    return drawn


def load_labels(labels, row: int = 0):
    """(n,) int64 labels from a cluster store or an int64 .npy (row ``row``
    of a (K, n) cut)."""
    import os

    if str(labels).endswith(".npy"):
        if not os.path.exists(labels):
            raise InputError(f"{labels}: no such file")
        lab = np.load(labels, allow_pickle=False)
    else:
        from ..io.cluster_store import read_clusters

        lab = read_clusters(labels)["labels"]
    if lab.ndim == 2:
        if not 0 <= row < lab.shape[0]:
            raise InputError(f"{labels}: has {lab.shape[0]} rows of labels, not row {row}")
        lab = lab[row]
    if lab.ndim != 1 or lab.dtype.kind not in "iu":
        raise InputError(f"{labels}: not labels (an int64 (n,) or (K, n) array)")
    return lab.astype(np.int64, copy=False)


def plot_clusters(labels, points, out, *, columns=None, array=None, slab: float = 0.02,
                  max_points: int = 60_000, row: int = 0, overwrite: bool = False) -> str:
    """Draw the points of a thin slab in z coloured by cluster (noise grey).

    Parameters
    ----------
    labels : a cluster store or an int64 .npy of labels
    points : the source the labels are of
    out : path of the picture (.png, .pdf or .svg; ``io.picture``)
    columns, array : select the coordinates of a Zarr group
    slab : float
        Thickness of the slab, as a fraction of the z extent, in (0, 1].
    max_points : int
        The slab is cropped in x-y to about this many points.
    row : int
        Which row of a (K, n) friends-of-friends cut.
    overwrite : bool
        Replace a picture this package drew (never another file).

    Returns
    -------
    str
        A one-line summary.
    """
    import matplotlib

    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt

    picture = resolve_picture(out, overwrite, locations(labels, points))
    _check_slab(slab)
    lab = load_labels(labels, row)
    src = resolve_source(points, array=array, columns=columns)
    if src.n != len(lab):
        raise InputError(f"{points} has {src.n} points but {labels} labels {len(lab)}")
    pts = src.read_all()
    if pts.shape[1] < 2:
        raise InputError("plot-clusters draws clouds of 2 or more dimensions")
    mask, where = slab_selection(pts, slab, max_points)
    sel, sl = pts[mask], lab[mask]
    fig, ax = plt.subplots(figsize=(8, 7.5), layout="constrained")
    noise = sl < 0
    ax.scatter(sel[noise, 0], sel[noise, 1], s=1.0, c="0.75", linewidths=0, label="noise")
    if (~noise).any():
        cm = plt.get_cmap("tab20")
        ax.scatter(sel[~noise, 0], sel[~noise, 1], s=1.5, c=cm(sl[~noise] % 20),
                   linewidths=0)
    ax.set_aspect("equal", adjustable="box")
    n_clusters = int(lab.max()) + 1 if len(lab) else 0
    ax.set_title(f"{n_clusters} clusters, {int((lab < 0).sum())} noise points "
                 f"of {len(lab)}\n{where}", fontsize=10)
    try:
        save_picture(fig, picture)
    finally:
        plt.close(fig)
    return f"{int(mask.sum())} points of the slab, {len(np.unique(sl[sl >= 0]))} clusters in it"
