"""``HDBSCANResult``: what ``extract`` returns, on the host
(``extract``) or where the tree is (``device``), in a module below both."""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np


@dataclass
class HDBSCANResult:
    """The flat clustering and what comes with it.

    Attributes
    ----------
    labels : (n,) int64, -1 for noise; label ``i`` is cluster ``selected[i]``.
    probabilities : (n,) float64, membership strengths (0 for noise).
    outlier_scores : (n,) float64, GLOSH scores.
    condensed_tree : (r,) ``CONDENSED_DTYPE`` array.
    stability : (K,) float64, stability of cluster ``n + k`` (before
        excess of mass).
    persistence : (k,) float64, per selected cluster in label order.
    selected : (k,) int64, the selected cluster ids, increasing.
    timings : dict, seconds per phase (computed on the device only).
    """

    labels: np.ndarray
    probabilities: np.ndarray
    outlier_scores: np.ndarray
    condensed_tree: np.ndarray
    stability: np.ndarray
    persistence: np.ndarray
    selected: np.ndarray
    timings: dict = field(default_factory=dict)

    @property
    def n_clusters(self) -> int:
        """Number of selected clusters."""
        return int(self.selected.shape[0])
