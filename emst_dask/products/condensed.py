"""The condensed tree of HDBSCAN*, as hdbscan's structured array, with a plot."""
from __future__ import annotations

import numpy as np


class CondensedTree:
    """HDBSCAN*'s condensed tree.

    ``to_numpy()`` (also ``np.asarray(tree)``) is hdbscan's structured array:
    one row per (parent, child) with fields ``parent``, ``child`` (int64;
    clusters numbered from n, the root n; points are children < n),
    ``lambda_val`` (float64, 1 / distance at which the child leaves the
    parent) and ``child_size`` (int64).  ``plot()`` draws the icicle plot.

    Parameters
    ----------
    array : structured numpy array (parent, child, lambda_val, child_size),
        or an object whose ``to_numpy()`` builds it when first needed
    n_points : int
    selected : sequence of int
        The condensed-tree ids of the selected clusters, in label order.
    """

    def __init__(self, array, n_points: int, selected=()):
        self._array = array
        self.n_points = int(n_points)
        self.selected = [int(c) for c in selected]

    def to_numpy(self) -> np.ndarray:
        """The structured array (parent, child, lambda_val, child_size)."""
        if not isinstance(self._array, np.ndarray):
            self._array = self._array.to_numpy()
        return self._array

    def to_pandas(self):
        """hdbscan's ``to_pandas()``: a DataFrame with columns ``parent``,
        ``child``, ``lambda_val``, ``child_size`` (needs pandas)."""
        import pandas

        return pandas.DataFrame(self.to_numpy())

    def __array__(self, dtype=None, copy=None):
        a = self.to_numpy()
        return a if dtype is None else a.astype(dtype)

    def __len__(self) -> int:
        return len(self.to_numpy())

    def __repr__(self) -> str:
        a = self.to_numpy()
        clusters = int((a["child_size"] > 1).sum()) + 1 if len(a) else 1
        return (f"CondensedTree(n_points={self.n_points}, clusters={clusters}, "
                f"selected={len(self.selected)})")

    def plot(self, ax=None, *, select_clusters: bool = True, log_size: bool = False,
             cmap: str = "viridis"):
        """The icicle plot: each cluster a bar from its birth to its death in
        lambda (downwards), as wide as its size, selected clusters outlined.

        Parameters
        ----------
        ax : matplotlib Axes, optional
        select_clusters : bool
            Outline the selected clusters.
        log_size : bool
            Bar widths on a log scale of the cluster sizes.
        cmap : str
            Colour of a bar by the number of points still in the cluster.

        Returns
        -------
        matplotlib Axes
        """
        import matplotlib.pyplot as plt
        from matplotlib.patches import Rectangle

        if ax is None:
            _, ax = plt.subplots(figsize=(8, 5))
        t = self.to_numpy()
        if len(t) == 0:
            ax.set_title("empty condensed tree")
            return ax
        root = int(t["parent"].min())
        clusters = t[t["child_size"] > 1]
        birth = {root: 0.0}
        size = {root: self.n_points}
        children: dict = {}
        for row in clusters:
            birth[int(row["child"])] = float(row["lambda_val"])
            size[int(row["child"])] = int(row["child_size"])
            children.setdefault(int(row["parent"]), []).append(int(row["child"]))
        finite = t["lambda_val"][np.isfinite(t["lambda_val"])]
        top = float(finite.max()) if finite.size else 1.0
        death = {}
        for c in birth:
            rows = t["lambda_val"][t["parent"] == c]
            rows = rows[np.isfinite(rows)]
            death[c] = float(rows.max()) if rows.size else top
        width = (lambda s: np.log2(max(s, 1)) + 1) if log_size else float
        colours = plt.get_cmap(cmap)
        x = {}

        def place(c, left):  # lay clusters out left to right, depth first
            w = width(size[c])
            x[c] = (left, w)
            kids = children.get(c, [])
            inner = sum(width(size[k]) for k in kids)
            off = left + (w - inner) / 2
            for k in kids:
                place(k, off)
                off += width(size[k])

        place(root, 0.0)
        for c, (left, w) in x.items():
            b, d = birth[c], max(death[c], birth[c])
            ax.add_patch(Rectangle((left, b), w, d - b, facecolor=colours(0.35),
                                   edgecolor="none", alpha=0.8))
            if select_clusters and c in self.selected:
                ax.add_patch(Rectangle((left, b), w, d - b, fill=False, edgecolor="tab:red",
                                       linewidth=1.5))
            for k in children.get(c, []):
                kl, kw = x[k]
                ax.plot([left + w / 2, kl + kw / 2], [birth[k], birth[k]], color="0.3", lw=0.6)
        total = width(self.n_points)
        ax.set_xlim(-0.02 * total, 1.02 * total)
        ax.set_ylim(top * 1.02, 0)
        ax.set_ylabel("lambda = 1 / distance")
        ax.set_xticks([])
        ax.set_title(f"condensed tree: {len(x)} clusters, {len(self.selected)} selected")
        return ax


class LinkageMatrix(np.ndarray):
    """The (n-1, 4) float64 scipy linkage matrix (a numpy array) of a tree,
    with hdbscan's ``to_pandas()``."""

    def to_numpy(self) -> np.ndarray:
        """The matrix as a plain numpy array."""
        return np.asarray(self).view(np.ndarray)

    def to_pandas(self):
        """hdbscan's table of the merges: ``parent`` (n + i for merge i),
        ``left_child``, ``right_child`` (int64), ``distance`` (float64) and
        ``size`` (int64, points under the parent); needs pandas."""
        import pandas

        z = self.to_numpy()
        n = z.shape[0] + 1
        return pandas.DataFrame({"parent": np.arange(n, n + z.shape[0], dtype=np.int64),
                                 "left_child": z[:, 0].astype(np.int64),
                                 "right_child": z[:, 1].astype(np.int64),
                                 "distance": z[:, 2],
                                 "size": z[:, 3].astype(np.int64)})
