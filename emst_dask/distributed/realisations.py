"""Realisations of one catalogue as one batch: a job per worker at a time.

``mst_statistics_many`` checks everything on the client, fixes the bins
the batch shares (from realisation 0 unless the caller gives the ranges),
then runs the realisations: in this process, or on the workers of a Dask
cluster, each worker holding one realisation at a time (one per GPU on a
dask-cuda cluster).  In-memory points are scattered to every worker once;
a stored catalogue is read by each worker.  The algorithm is
``emst_dask.products.realisations``; nothing here computes a statistic.
"""
from __future__ import annotations

import uuid

import numpy as np

from ..errors import InputError, WorkerLost
from ..io.checks import as_points, check_backend, check_in_box, check_min_samples
from ..io.checks import source_box_size
from ..io.resolve import resolve_source
from ..io.source import is_in_memory
from ..products.realisations import (check_realisation, ensemble, realisation_histograms,
                                     realisation_seeds, shared_bins)
from .client import client_for
from .dispatch import one_per_worker
from .faults import lost_error, refusing, scheduler_lost, unwrap, workers_died
from .worker import apply_settings


def _catalogue(source, box_size, columns, array, storage_options):
    """(points or None, source or None, n, box): in-memory points are
    validated here; a stored catalogue is resolved (read on the workers)."""
    if is_in_memory(source):
        if isinstance(box_size, str):
            raise InputError(f"box_size={box_size!r} needs a snapshot; in-memory points take "
                             "the box's lengths")
        pts = as_points(source)
        if not isinstance(pts, np.ndarray):
            pts = pts.get()
        from ..io.checks import check_box_size

        box = check_box_size(box_size, pts.shape[1])
        check_in_box(pts, box)
        return pts, None, pts.shape[0], box
    src = resolve_source(source, array=array, columns=columns,
                         storage_options=storage_options)
    return None, src, src.n, source_box_size(box_size, src)


def _points_of(points, src):
    if points is not None:
        return points
    pts = src.read_all()
    return pts


@refusing
def realisation_task(points, src, how, seed, bins, min_samples, backend):
    """One realisation on a worker (its settings applied): the small dict of
    ``realisation_histograms``."""
    apply_settings()
    pts = _points_of(points, src)
    if src is not None:
        check_in_box(pts, how.box_size, where=src.where)
    return realisation_histograms(pts, how, seed, bins, min_samples=min_samples,
                                  backend=backend)


def mst_statistics_many(source, realisations: int = 16, *, subsample=None, jitter=None,
                        box_size=None, seed: int = 0, min_samples: int = 1,
                        backend: str = "auto", client=None, bins: dict | None = None,
                        columns=None, array=None, storage_options=None, progress=None):
    """The MST statistics of many realisations of one catalogue.

    Parameters
    ----------
    source : (n, d) array, or anything ``emst`` takes (a snapshot path...)
    realisations : int
        R >= 1.
    subsample : float in (0, 1], int, or None
        Each realisation keeps each point with this probability, or exactly
        this many points (``emst_dask.products.realisations.Realisation``).
    jitter : float, optional
        Gaussian displacement of every coordinate (wrapped in a box).
    box_size : float, (d,) floats, "snapshot" or None
        The periodic box (trees and branch shapes under the minimum image).
    seed : int
        Realisation i draws from the i-th child of ``SeedSequence(seed)``:
        the batch is reproducible whatever runs it.
    min_samples : int
        Of the trees (1: Euclidean, as MiSTree).
    backend : {"auto", "cpu", "cuda"}
    client : distributed.Client, address, None or False
        None: in this process for in-memory points, else an embedded
        cluster; False: in this process.
    bins : dict, optional
        Keywords of ``MSTStatistics.histograms`` (``l_range``, ``b_range``,
        ``uselog``...); length ranges not given come from realisation 0.
    columns, array, storage_options : select a stored catalogue's arrays.
    progress : True (a bar) or callable(done, total), optional

    Returns
    -------
    StatisticsEnsemble
        Per-realisation histograms on shared bins, their mean and spread.
    """
    if isinstance(realisations, bool) or not isinstance(realisations, (int, np.integer)) \
            or realisations < 1:
        raise InputError(f"realisations must be an integer >= 1; got {realisations!r}")
    check_backend(backend)
    points, src, n, box = _catalogue(source, box_size, columns, array, storage_options)
    k = check_min_samples(min_samples, n)
    how = check_realisation(subsample, jitter, n, box)
    bins = dict(bins or {})
    seeds = realisation_seeds(int(seed), int(realisations))
    if client is None and points is not None:
        client = False
    bar, report = _progress(progress, int(realisations))
    try:
        with client_for(client, inline_ok=True, backend=backend) as cl:
            run = _run_here if cl is None else _dispatcher(cl, points, src)
            fixed = ("l_range" in bins and "b_range" in bins)
            if not fixed:  # realisation 0 fixes the length ranges the batch shares
                first = run(points, src, how, [seeds[0]], bins, k, backend, None)[0]
                bins = shared_bins(first, bins)
            results = run(points, src, how, seeds, bins, k, backend, report)
    finally:
        if bar is not None:
            bar.close()
    return ensemble(results, seeds)


def _progress(progress, total):
    if progress is True:
        from tqdm.auto import tqdm

        bar = tqdm(total=total, desc="realisations", unit="tree", dynamic_ncols=True)
        return bar, lambda done, total: bar.update(1)
    if callable(progress):
        return None, progress
    if progress in (None, False):
        return None, None
    raise InputError(f"progress must be True, False, None or a callable, got {progress!r}")


def _run_here(points, src, how, seeds, bins, k, backend, report):
    pts = _points_of(points, src)
    if src is not None:
        check_in_box(pts, how.box_size, where=src.where)
    out = []
    for s in seeds:
        out.append(realisation_histograms(pts, how, s, bins, min_samples=k, backend=backend))
        if report:
            report(len(out), len(seeds))
    return out


def _dispatcher(cl, points, src):
    """The batch runner on cluster ``cl``: at most one realisation per
    worker; the points scattered once (broadcast) when in memory."""
    data = cl.scatter(points, broadcast=True, hash=False) if points is not None else None

    def run(_points, _src, how, seeds, bins, k, backend, report):
        token = uuid.uuid4().hex[:8]
        results = [None] * len(seeds)
        attempt = [0] * len(seeds)   # in the task keys of a resubmission
        done = [0]

        def submit(i, w):
            again = f"-again{attempt[i]}" if attempt[i] else ""
            return cl.submit(realisation_task, data, src, how, seeds[i], bins, k, backend,
                             workers=[w], allow_other_workers=False, pure=False,
                             key=f"emst-realisation-{token}-{i}{again}")

        def finish(i, fut):
            try:
                results[i] = unwrap(fut.result())
            except Exception as exc:
                lost = lost_error(f"realisation {i}", None, exc, cl)
                if lost is not None:
                    raise lost from exc
                raise
            done[0] += 1
            if report:
                report(done[0], len(seeds))
            return False

        def orphaned(i, w, deaths):
            attempt[i] = deaths

        def gave_up(i, w, deaths, allowed):
            raise workers_died(f"realisation {i}", deaths, allowed, w)

        try:
            one_per_worker(cl, range(len(seeds)), submit, finish, orphaned, gave_up,
                           names=lambda i: f"realisation {i}")
        except Exception as exc:  # the scheduler gone: said so, whichever call met it
            if isinstance(exc, WorkerLost) or not scheduler_lost(exc, cl):
                raise
            raise lost_error("realisations", None, exc, cl) from exc
        return results

    return run


__all__ = ["mst_statistics_many", "realisation_task"]
