"""Many realisations of one catalogue: the spread of its MST statistics.

A catalogue gives one tree; the statistics of one tree are noisy.  As
Naidoo and Lahav do, the spread is estimated from realisations of the same
catalogue: Monte-Carlo subsamples (each point kept with probability f, or
exactly m points drawn without replacement) and/or jittered copies (each
coordinate displaced by a Gaussian of standard deviation sigma, wrapped
back into a periodic box).  Each realisation gets its own tree and
statistics, binned on bins shared by the whole batch, so the mean and the
standard deviation per bin are meaningful.

This module is the functional core: ``draw`` (one realisation from a seed),
``realisation_histograms`` (its tree, statistics and histograms) and
``StatisticsEnsemble`` (the batch's histograms, mean and spread).  Running
the realisations over Dask workers, one job per worker at a time, is
``emst_dask.distributed.realisations``.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ..errors import InputError

#: the histograms of a realisation, in this order
STATISTICS = ("degree", "edge_length", "branch_length", "branch_shape")


@dataclass(frozen=True)
class Realisation:
    """How one realisation is drawn from the catalogue.

    Attributes
    ----------
    subsample : float in (0, 1], int >= 2, or None
        Keep each point with this probability (a float), or draw exactly
        this many points without replacement (an int); None keeps all.
    jitter : float >= 0 or None
        Standard deviation of a Gaussian displacement of every coordinate
        (in coordinate units); wrapped into the box when there is one.
    box_size : (d,) float64 or None
        The periodic box.
    """

    subsample: float | int | None = None
    jitter: float | None = None
    box_size: np.ndarray | None = None


def check_realisation(subsample, jitter, n: int, box_size=None) -> Realisation:
    """Validate the realisation parameters before any work.

    Parameters
    ----------
    subsample : float, int or None
    jitter : float or None
    n : int
        Points in the catalogue.
    box_size : (d,) float64 or None (checked by the caller)

    Returns
    -------
    Realisation
    """
    if subsample is not None:
        if isinstance(subsample, bool) or not isinstance(subsample, (int, float, np.number)):
            raise InputError(f"subsample must be a fraction in (0, 1] or a count; got "
                             f"{subsample!r}")
        if isinstance(subsample, (int, np.integer)):
            if not 2 <= subsample <= n:
                raise InputError(f"subsample={subsample} points: need 2 to n = {n}")
            subsample = int(subsample)
        else:
            subsample = float(subsample)
            if not 0.0 < subsample <= 1.0:
                raise InputError(f"subsample fraction must be in (0, 1]; got {subsample}")
    if jitter is not None:
        try:
            jitter = float(jitter)
        except (TypeError, ValueError):
            raise InputError(f"jitter must be a length >= 0; got {jitter!r}") from None
        if not (np.isfinite(jitter) and jitter >= 0):
            raise InputError(f"jitter must be a finite length >= 0; got {jitter}")
    return Realisation(subsample, jitter, box_size)


def realisation_seeds(seed: int, count: int) -> list:
    """``count`` independent seeds from one (numpy's SeedSequence spawning):
    realisation i is the same whatever runs it and in whatever order."""
    return np.random.SeedSequence(seed).spawn(count)


def draw(points: np.ndarray, how: Realisation, seed) -> np.ndarray:
    """One realisation of ``points``.

    Parameters
    ----------
    points : (n, d) float32/float64 numpy array
    how : Realisation
    seed : numpy SeedSequence or int

    Returns
    -------
    (m, d) array of the points' dtype: the kept rows in their order,
    jittered (and wrapped into [0, L) in a periodic box).
    """
    rng = np.random.default_rng(seed)
    n = points.shape[0]
    x = points
    if isinstance(how.subsample, int):
        x = x[np.sort(rng.choice(n, size=how.subsample, replace=False))]
    elif how.subsample is not None and how.subsample < 1.0:
        x = x[rng.random(n) < how.subsample]
    if how.jitter:
        x = x + rng.normal(0.0, how.jitter, x.shape).astype(x.dtype)
        if how.box_size is not None:
            L = how.box_size.astype(x.dtype)
            x = np.mod(x, L)
            x[x >= L] = 0  # rounding can land on L, which is 0 in the box
    return np.ascontiguousarray(x)


def realisation_histograms(points, how: Realisation, seed, bins: dict, *, min_samples=1,
                           backend="auto") -> dict:
    """The tree, statistics and histograms of one realisation.

    Parameters
    ----------
    points : (n, d) float numpy array, the catalogue
    how : Realisation
    seed : SeedSequence or int
    bins : dict
        Keywords of ``MSTStatistics.histograms`` (the batch's shared ranges).
    min_samples : int
    backend : {"auto", "cpu", "cuda"}

    Returns
    -------
    dict
        ``n`` (points kept), ``summary`` (``MSTStatistics.summary``),
        ``histograms`` ({statistic: (k,) values}), ``edges`` ({statistic:
        (k+1,) bin edges}), ``outside`` ({statistic: values outside the
        bins}), ``maxima`` and ``minima`` ({"edge_length", "branch_length":
        the largest, and the smallest positive, value}).
    """
    from ..engine import spanning_tree

    x = draw(points, how, seed)
    if x.shape[0] < 2:
        raise InputError(f"a realisation kept {x.shape[0]} point(s): raise subsample")
    tree = spanning_tree(x, min_samples, backend, box_size=how.box_size)
    st = tree.statistics(x).to_numpy()
    hist = st.histograms(**bins)
    out = {"n": int(x.shape[0]), "summary": st.summary(), "histograms": {}, "edges": {},
           "outside": {}, "maxima": {}}
    raw = {"degree": st.degree, "edge_length": st.edge_length,
           "branch_length": st.branch_length,
           "branch_shape": (None if st.branch_shape is None
                            else (np.sqrt(1.0 - st.branch_shape) if hist.use_sqrt_s
                                  else st.branch_shape))}
    for name in STATISTICS:
        h = getattr(hist, name)
        if h is None:
            continue
        out["histograms"][name] = np.asarray(h.values, np.float64)
        out["edges"][name] = np.asarray(h.edges, np.float64)
        v = np.asarray(raw[name], np.float64)
        v = v[~np.isnan(v)]
        out["outside"][name] = int(np.count_nonzero((v < h.edges[0]) | (v > h.edges[-1])))
    for name in ("edge_length", "branch_length"):
        v = np.asarray(raw[name], np.float64)
        out["maxima"][name] = float(v.max()) if v.size else 0.0
        pos = v[v > 0]
        out["minima"] = dict(out.get("minima", {}), **{name: float(pos.min()) if pos.size
                                                       else 0.0})
    return out


@dataclass
class StatisticsEnsemble:
    """The MST statistics of a batch of realisations.

    Attributes
    ----------
    edges : {statistic: (k+1,) float64}, the shared bin edges.
    values : {statistic: (R, k) float64}, each realisation's histogram
        (densities, or counts with ``density=False``).
    outside : {statistic: (R,) int64}, values of each realisation outside
        the bins (shared bins fixed up front: nothing is dropped silently).
    summaries : list of R dicts (``MSTStatistics.summary``).
    n : (R,) int64, points in each realisation.
    seeds : list of R numpy SeedSequence, to redraw any realisation.
    """

    edges: dict
    values: dict
    outside: dict
    summaries: list
    n: np.ndarray
    seeds: list = field(default_factory=list)

    @property
    def realisations(self) -> int:
        """R, the number of realisations."""
        return len(self.summaries)

    def centres(self, name: str) -> np.ndarray:
        """(k,) bin centres of a statistic."""
        e = self.edges[name]
        return 0.5 * (e[1:] + e[:-1])

    def mean(self, name: str) -> np.ndarray:
        """(k,) mean histogram over the realisations."""
        return self.values[name].mean(axis=0)

    def std(self, name: str) -> np.ndarray:
        """(k,) standard deviation over the realisations (ddof = 1; zeros for
        a single realisation)."""
        v = self.values[name]
        return v.std(axis=0, ddof=1) if v.shape[0] > 1 else np.zeros(v.shape[1])

    def plot(self, path=None):
        """The four mean histograms with a band of one standard deviation;
        drawn to ``path`` (.png, .pdf or .svg; ``io.picture``: an existing
        file is refused) when given.  Returns the figure."""
        names = [s for s in STATISTICS if s in self.values]
        size = (4 * len(names), 3.4)
        if path is not None:
            from matplotlib.figure import Figure  # no pyplot: no backend is chosen

            from ..io.picture import resolve_picture, save

            path = resolve_picture(path)
            fig = Figure(figsize=size)
            axes = fig.subplots(1, len(names))
        else:
            import matplotlib.pyplot as plt

            fig, axes = plt.subplots(1, len(names), figsize=size)
        axes = np.atleast_1d(axes)
        labels = {"degree": "degree", "edge_length": "edge length",
                  "branch_length": "branch length", "branch_shape": r"$\sqrt{1-s}$"}
        for ax, name in zip(axes, names):
            c, m, s = self.centres(name), self.mean(name), self.std(name)
            ax.step(c, m, where="mid", color="C0")
            ax.fill_between(c, m - s, m + s, step="mid", color="C0", alpha=0.3, linewidth=0)
            ax.set_xlabel(labels[name])
        axes[0].set_ylabel(f"mean of {self.realisations} realisations (band: 1 std)")
        fig.tight_layout()
        if path is not None:
            save(fig, path)
        return fig


def ensemble(results: list, seeds: list) -> StatisticsEnsemble:
    """A ``StatisticsEnsemble`` from the dicts of ``realisation_histograms``.

    Parameters
    ----------
    results : list of R dicts (same bins)
    seeds : list of R seeds

    Returns
    -------
    StatisticsEnsemble
    """
    names = [s for s in STATISTICS if s in results[0]["histograms"]]
    for r in results[1:]:
        for s in names:
            if not np.array_equal(r["edges"][s], results[0]["edges"][s]):
                raise RuntimeError("realisations binned on different edges; this is a bug, "
                                   "please report it")
    return StatisticsEnsemble(
        edges={s: results[0]["edges"][s] for s in names},
        values={s: np.stack([r["histograms"][s] for r in results]) for s in names},
        outside={s: np.array([r["outside"][s] for r in results], np.int64) for s in names},
        summaries=[r["summary"] for r in results],
        n=np.array([r["n"] for r in results], np.int64), seeds=list(seeds))


def shared_bins(first: dict, bins: dict, headroom: float = 1.5) -> dict:
    """The batch's bins: the user's, with length ranges not given taken from
    the first realisation: up to its largest value times ``headroom``, from
    0 (from its smallest positive value over ``headroom`` with ``uselog``).
    Values beyond are counted in ``outside``, never dropped silently.

    Parameters
    ----------
    first : dict of ``realisation_histograms`` for realisation 0
    bins : dict, the user's ``histograms`` keywords
    headroom : float

    Returns
    -------
    dict of ``histograms`` keywords with ``l_range`` and ``b_range`` fixed
    """
    out = dict(bins)
    for key, stat in (("l_range", "edge_length"), ("b_range", "branch_length")):
        if out.get(key) is None:
            hi = first["maxima"][stat] * headroom
            hi = hi if hi > 0 else 1.0
            if out.get("uselog"):  # log10 bins need a positive lower end
                lo = first["minima"][stat] / headroom
                out[key] = (lo if lo > 0 else hi * 1e-6, hi)
            else:
                out[key] = (0.0, hi)
    return out


__all__ = ["Realisation", "StatisticsEnsemble", "check_realisation", "draw", "ensemble",
           "realisation_histograms", "realisation_seeds", "shared_bins", "STATISTICS"]
