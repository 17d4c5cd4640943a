"""One EMST job: its description and the tasks a worker runs for it.

A job is three tasks on one worker, named per phase so that the dashboard
shows them (``emst-read-<token>-<name>``, ``emst-boruvka-...``,
``emst-write-...``):

1. *read*: the source staged in host memory (CPU workers) or device memory
   (GPU workers), every block checked before any kernel runs (``io.stage``);
2. *boruvka*: the in-memory core (``engine.spanning_tree``) on the staged
   array with the worker's backend;
3. *write* (with an output): the edge store, complete or absent
   (``io.write_edges``); the client gets back a small ``EdgeStore``
   handle, never the edges.  Without an output the tree is the result.

Each task reports its progress as Dask events on the job's topic, applies
the worker's settings (``worker.apply_settings``) and returns the user's
errors as ``faults.Refused`` rather than raising them.
"""
from __future__ import annotations

import logging
import re
import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..arrays import to_host
from ..engine import spanning_tree
from ..errors import JobCancelled
from ..progress import guarded
from ..io import Output, PointSource, resolve_source, stage, write_edges
from ..io.checks import check_in_box, check_min_samples, source_box_size
from ..io.edge_store import host_tree
from ..tree import SpanningTree
from .faults import Refused, refusing
from .worker import apply_settings

log = logging.getLogger(__name__)


@dataclass
class DeferredSource:
    """A path the client cannot see: resolved on the worker."""

    path: str
    array: str | None = None
    columns: tuple | None = None
    storage_options: dict | None = None

    def resolve(self) -> PointSource:
        """The ``PointSource`` of the path, resolved here (on the worker)."""
        return resolve_source(self.path, array=self.array, columns=self.columns,
                              storage_options=self.storage_options)

    def describe(self) -> str:
        """The source in messages: the path, with its array or columns."""
        if self.columns:
            return f"{self.path}[{','.join(self.columns)}]"
        return self.path if self.array is None else f"{self.path}/{self.array}"


@dataclass
class JobSpec:
    """What travels to the worker: everything a job's tasks need.

    Attributes
    ----------
    name, token : str
        The job's name and its unique token (task keys, temporaries).
    source : PointSource or DeferredSource
        Resolved on the client (metadata only when ``from_blocks``).
    input : str
        What the edge store records as its input.
    output : Output or None
    min_samples : int
    backend : {"auto", "cpu", "cuda"}
    sort_by_weight : bool
    threads : int or None
        Reader and writer threads.
    from_blocks : bool
        The read task gets the row blocks as arguments (in-memory points,
        dask arrays).
    submitted : float
        time.time() of the submission.
    attempt : int
        > 0: resubmitted after its in-memory input was lost.
    clusters : dict or None
        HDBSCAN* parameters (``products.hdbscan.extract``'s keywords): the
        job also clusters the tree, on the same worker.
    clusters_output : Output or None
        Where the worker writes the clusters (a cluster store).
    box_size : (d,) float64, "snapshot" or None
        A periodic box (checked on the client where it could be; "snapshot"
        is read from the source on the worker).
    """

    name: str
    token: str
    source: Any
    input: str
    output: Output | None = None
    min_samples: int = 1
    backend: str = "auto"
    sort_by_weight: bool = False
    threads: int | None = None
    from_blocks: bool = False
    submitted: float = field(default_factory=time.time)
    attempt: int = 0
    clusters: dict | None = None
    clusters_output: Output | None = None
    box_size: Any = None

    @property
    def topic(self) -> str:
        """The Dask event topic of the job's progress, ``emst-progress-<token>``."""
        return f"emst-progress-{self.token}"

    def key(self, phase: str) -> str:
        """The task key of ``phase`` ("read", "boruvka", "write")."""
        again = f"-again{self.attempt}" if self.attempt else ""
        return f"emst-{phase}-{self.token}-{slug(self.name)}{again}"


def slug(name: str) -> str:
    """``name`` as it may appear in a task key."""
    return re.sub(r"[^A-Za-z0-9_.]+", "_", str(name))[:60] or "job"


class Reporter:
    """``report(phase, **info)``: a Dask event on a worker, and/or a call."""

    def __init__(self, spec: JobSpec, callback=None, on_worker=True):
        self.topic = spec.topic
        self.job = spec.name
        self.callback = guarded(callback)
        self.worker = None
        self.key = None  # of the task reporting
        if on_worker:
            try:
                from distributed import get_worker

                self.worker = get_worker()
                self.key = self.worker.get_current_task()
            except (ImportError, ValueError):
                pass
        self._last = 0.0

    @property
    def address(self):
        """The address of the worker reporting, or None off a worker."""
        return None if self.worker is None else self.worker.address

    def raise_if_cancelled(self):
        """Stop a task whose key the scheduler released (``Job.cancel()``, or
        every client let the job go): Dask does not interrupt a running
        task, so the task stops itself at its next report, and its
        temporaries go with it (``Output.written_aside``)."""
        if self.worker is None or self.key is None:
            return
        ts = self.worker.state.tasks.get(self.key)
        if ts is None or ts.state in ("cancelled", "released", "forgotten"):
            raise JobCancelled(f"job {self.job!r} was cancelled")

    def __call__(self, phase, **info):
        if phase not in ("error", "done"):  # a finished job is not undone
            self.raise_if_cancelled()
        info = {k: _plain(v) for k, v in info.items()}
        if phase in ("read", "write"):  # at most ~10 a second, the last always
            t = time.monotonic()
            if 0 < info.get("rows", 0) < info.get("total", 0) and t - self._last < 0.1:
                return
            self._last = t
        if self.worker is not None:
            try:
                self.worker.log_event(self.topic, {"phase": phase, "job": self.job,
                                                   "time": time.time(), **info})
            except Exception:  # progress must never fail a job
                log.debug("could not log a progress event", exc_info=True)
        if self.callback is not None:
            self.callback(phase, **info)


def _plain(v):
    if isinstance(v, np.integer):
        return int(v)
    if isinstance(v, np.floating):
        return float(v)
    if isinstance(v, (str, int, float, bool)) or v is None:
        return v
    return str(v)


# --------------------------------------------------------------------------
# the phases
# --------------------------------------------------------------------------
def _source(spec: JobSpec, blocks) -> PointSource:
    from ..io.source import BlockPoints

    src = spec.source
    if isinstance(src, DeferredSource):
        src = src.resolve()
    if spec.from_blocks:
        src = BlockPoints(blocks, src)
    return src


def read(spec: JobSpec, blocks, report):
    """Check what only the worker can see, then stage the points:
    (array, seconds per step (dict), periodic box (d,) float64 or None)."""
    from ..kernels import resolve_backend

    t0 = time.perf_counter()
    # from the submission to this task's start (scheduling, a busy worker)
    seconds = {"queue": max(0.0, time.time() - spec.submitted)}
    src = _source(spec, blocks)
    check_min_samples(spec.min_samples, src.n)
    if spec.output is not None:  # again here: the worker's view of the files
        spec.output.check(src.location)
    backend = resolve_backend(spec.backend)
    report("start", n=src.n, d=src.d, backend=backend, worker=report.address or "",
           input=spec.input)
    box = source_box_size(spec.box_size, src)
    staged = stage(src, backend, threads=spec.threads, report=report, timings=seconds)
    check_in_box(staged, box, where=src.where)
    seconds["read"] = time.perf_counter() - t0
    return staged, seconds, box


def tree(spec: JobSpec, staged, read_seconds: dict, report, box=None) -> SpanningTree:
    """The spanning tree of the staged points (the in-memory core);
    ``read_seconds``: what ``read`` timed, kept in the tree's timings."""
    report("tree")
    t0 = time.perf_counter()
    t = spanning_tree(staged, spec.min_samples, spec.backend, box_size=box,
                      sort_by_weight=spec.sort_by_weight, progress=report)
    t.timings = dict(t.timings or {})
    t.timings.update({k: float(v) for k, v in read_seconds.items()})
    t.timings["emst"] = time.perf_counter() - t0
    return t


def write(spec: JobSpec, t: SpanningTree, report):
    """The edge store of ``t``."""
    t0 = time.perf_counter()
    t.total_weight  # noqa: B018 - once, timed (a reduction on the device on GPU workers)
    t.timings["total_weight"] = time.perf_counter() - t0
    return write_edges(spec.output, t, input=spec.input, threads=spec.threads, report=report,
                       extra_attrs={"job": spec.name, "sorted_by_weight": spec.sort_by_weight})


@dataclass
class Clusters:
    """What a clustering job returns: the arrays (host), or with
    ``clusters_output`` only where they were written.

    Attributes
    ----------
    labels, probabilities, outlier_scores : (n,) arrays or None
    condensed_tree : structured array or None
    persistence : (n_clusters,) float64 or None
    selected : list of int
    linkage : (n-1, 4) float64 or None (the estimator computes it from
        ``tree`` when asked)
    tree : SpanningTree or None
    path : str or None
        The cluster store, when written.
    n_clusters : int
    """

    labels: Any = None
    probabilities: Any = None
    outlier_scores: Any = None
    condensed_tree: Any = None
    persistence: Any = None
    selected: list = field(default_factory=list)
    linkage: Any = None
    tree: Any = None
    path: str | None = None
    n_clusters: int = 0


def cluster(spec: JobSpec, t: SpanningTree, report) -> Clusters:
    """HDBSCAN* of the tree ``t``, here; written to ``spec.clusters_output``
    when there is one."""
    from ..io.cluster_store import write_clusters
    from ..products.hdbscan import extract

    report("clusters")
    t0 = time.perf_counter()
    # clustered where the tree is (on a GPU worker, on its device); the
    # results come to the host to be written or returned
    res = extract(t.source, t.target, t.weight, t.n_points, **spec.clusters)
    t = host_tree(t)
    res.labels, res.probabilities, res.outlier_scores = (
        to_host(a) for a in (res.labels, res.probabilities, res.outlier_scores))
    res.condensed_tree = np.asarray(res.condensed_tree)
    n_clusters = len(res.selected)
    if spec.clusters_output is not None:
        c = res.condensed_tree
        arrays = {"labels": res.labels, "probabilities": res.probabilities,
                  "outlier_scores": res.outlier_scores, "persistence": res.persistence,
                  "condensed/parent": c["parent"], "condensed/child": c["child"],
                  "condensed/lambda_val": c["lambda_val"],
                  "condensed/child_size": c["child_size"]}
        attrs = dict(kind="hdbscan", n=int(t.n_points), n_clusters=n_clusters,
                     min_samples=int(t.min_samples), input=spec.input, job=spec.name,
                     selected=[int(x) for x in res.selected],
                     seconds=time.perf_counter() - t0, **spec.clusters)
        path = write_clusters(spec.clusters_output, arrays, attrs)
        return Clusters(path=path, n_clusters=n_clusters, selected=list(res.selected))
    return Clusters(res.labels, res.probabilities, res.outlier_scores, res.condensed_tree,
                    res.persistence, list(res.selected), None, t, None, n_clusters)


def done(spec: JobSpec, report, t: SpanningTree):
    """Report the job's end: seconds since submission, total weight, edge count."""
    report("done", seconds=time.time() - spec.submitted, total_weight=t.total_weight,
           n_edges=t.n_edges)


def _reported(report, fn, *args):
    """Run a phase; an error is reported on the job's topic, then raised."""
    try:
        return fn(*args)
    except BaseException as exc:
        report("error", message=f"{type(exc).__name__}: {exc}")
        raise


# --------------------------------------------------------------------------
# the tasks
# --------------------------------------------------------------------------
@refusing
def read_task(spec: JobSpec, *blocks):
    """The read task: ``read`` under the worker's settings; (staged array, seconds)."""
    apply_settings()
    report = Reporter(spec)
    return _reported(report, read, spec, blocks, report)


@refusing
def tree_task(spec: JobSpec, staged):
    """The Borůvka task: the tree of the staged points (moved to the host, and the
    job reported done, when the job has no output).
    """
    apply_settings()
    report = Reporter(spec)

    def run():
        points, seconds, box = staged
        t = tree(spec, points, seconds, report, box)
        if spec.output is None and spec.clusters is None:
            t = host_tree(t)
            done(spec, report, t)
        return t

    return _reported(report, run)


@refusing
def write_task(spec: JobSpec, t):
    """The write task: the edge store of tree ``t`` (an ``EdgeStore``), then the
    job reported done.
    """
    apply_settings()
    report = Reporter(spec)

    def run():
        store = write(spec, t, report)
        if spec.clusters is None:
            done(spec, report, t)
        return store

    return _reported(report, run)


@refusing
def cluster_task(spec: JobSpec, t, *written):
    """The clusters of the job's tree (after its edge store, if any)."""
    apply_settings()
    report = Reporter(spec)

    def run():
        res = cluster(spec, t, report)
        done(spec, report, t)
        return res

    return _reported(report, run)


def run_inline(spec: JobSpec, blocks=(), progress=None):
    """The whole job in this process (no Dask): read, Borůvka, write."""
    report = Reporter(spec, callback=progress, on_worker=False)

    def run():
        staged, seconds, box = read(spec, blocks, report)
        t = tree(spec, staged, seconds, report, box)
        store = None if spec.output is None else write(spec, t, report)
        if spec.clusters is not None:
            res = cluster(spec, t, report)
        elif store is not None:
            res = store
        else:
            res = t = host_tree(t)
        done(spec, report, t)
        return res

    try:
        return _reported(report, run)
    finally:
        for out in (spec.output, spec.clusters_output):
            if out is not None:
                out.cleanup()


def _register_sizeof():
    try:
        from dask.sizeof import sizeof

        @sizeof.register(SpanningTree)
        def _sizeof_tree(t):
            arrays = (t.source, t.target, t.weight, t.core_distances)
            return int(sum(a.nbytes for a in arrays if a is not None))
    except ImportError:  # pragma: no cover
        pass


_register_sizeof()

__all__ = ["DeferredSource", "JobSpec", "Refused", "read_task", "tree_task", "write_task",
           "cluster_task", "run_inline", "Clusters"]
