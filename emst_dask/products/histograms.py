"""Histograms of the MST statistics, binned as MiSTree's ``HistMST``
(linear or log10 bins for the lengths, the shape as sqrt(1 - s))."""
from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

import numpy as np


class Histogram(NamedTuple):
    """One binned statistic.

    Attributes
    ----------
    edges : (k+1,) float64, the bin edges.
    centres : (k,) float64, the bin centres (MiSTree's ``x_*``).
    values : (k,) float64 normalised densities, or int64 counts (MiSTree's
        ``y_*``).
    """

    edges: np.ndarray
    centres: np.ndarray
    values: np.ndarray


@dataclass
class MSTHistograms:
    """The four MST histograms, binned as MiSTree's ``HistMST``.

    Attributes
    ----------
    degree, edge_length, branch_length, branch_shape : Histogram
        (``branch_shape`` is None without the points); the shape is binned
        as ``sqrt(1 - s)`` when ``use_sqrt_s``; lengths on log10 bins (the
        edges and centres given in length units) when ``uselog``.
    uselog, use_sqrt_s, density : bool, the binning's options.
    """

    degree: Histogram
    edge_length: Histogram
    branch_length: Histogram
    branch_shape: Histogram | None
    uselog: bool = False
    use_sqrt_s: bool = True
    density: bool = True

    def as_mistree(self) -> dict:
        """The dictionary ``HistMST.get_hist`` returns: ``x_d``, ``y_d``,
        ``x_l``, ``y_l``, ``x_b``, ``y_b``, ``x_s``, ``y_s`` and the options."""
        out = {"uselog": self.uselog, "use_sqrt_s": self.use_sqrt_s, "usenorm": self.density,
               "isgroup": False}
        for key, h in (("d", self.degree), ("l", self.edge_length), ("b", self.branch_length),
                       ("s", self.branch_shape)):
            if h is not None:
                out[f"x_{key}"], out[f"y_{key}"] = h.centres, h.values
        return out


def _linear_range(a, given):
    """MiSTree's default range of a length: (0, 1.05 max), computed as it
    does (in the array's own float type)."""
    if given is not None:
        return float(given[0]), float(given[1])
    return 0.0, (1.05 * a.max() if len(a) else 1.0)


def _binned(a, lo, hi, bins, density) -> Histogram:
    """``np.histogram`` on ``np.linspace(lo, hi, bins + 1)`` (MiSTree's
    ``bin_data``)."""
    edges = np.linspace(lo, hi, bins + 1)
    values, _ = np.histogram(a, bins=edges, density=density)
    return Histogram(edges, 0.5 * (edges[1:] + edges[:-1]), values)


def _log_binned(a, given, bins, density) -> Histogram:
    """Lengths binned in log10 (MiSTree's ``uselog``): edges and centres
    returned in length units; lengths <= 0 are not counted."""
    pos = a[a > 0]
    if given is not None:
        lo, hi = np.log10(float(given[0])), np.log10(float(given[1]))
    elif len(pos):
        lo, hi = np.log10(0.95 * pos.min()), np.log10(1.05 * pos.max())
    else:
        lo, hi = 0.0, 1.0
    h = _binned(np.log10(pos), lo, hi, bins, density)
    return Histogram(10.0 ** h.edges, 10.0 ** h.centres, h.values)
