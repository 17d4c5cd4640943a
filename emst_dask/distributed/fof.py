"""Friends-of-friends catalogue jobs on Dask workers (``emst_dask.fof`` with
a snapshot, a client or the embedded cluster).

A job is two tasks on one worker, like an EMST job (``job``):

1. ``emst-read-<token>-<name>``: the positions staged in host or device
   memory, every block checked, the box taken (lengths, or the snapshot's
   ``BoxSize``) and the points checked against it (``job.read``, as for
   every job); for a snapshot the client could not list, the position
   array is chosen here;
2. ``emst-fof-<token>-<name>``: the velocities read (a named array of the
   snapshot) or taken (scattered), the absolute lengths, then the periodic tree
   (``engine.spanning_tree``), the labels and the catalogue
   (``products.fof``), written as a Zarr group complete or absent
   (``products.catalogue``): the client gets a ``FoFStore`` handle, or,
   without ``out=``, the ``FoFCatalogue`` (host arrays).

Points, tree and labels never leave the worker.  The client checks what it
can see before any task: the parameters, the source and its member, the
velocity array's shape, the ``BoxSize`` attribute, the output.  What only
the data show (a point outside the box, a bounding box of zero volume, NaN
velocities) is refused by the worker before the tree is computed.
"""
from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..errors import InputError
from ..io.checks import check_backend
from ..io.resolve import visible_here
from ..io.source import is_in_memory
from .faults import in_user_terms, refusing, unwrap
from .job import DeferredSource, JobSpec, Reporter, _reported, done, read
from .paused import scatter
from .worker import apply_settings


@dataclass
class FoFJob:
    """The friends-of-friends part of a job (what travels beside its ``JobSpec``).

    Attributes
    ----------
    values : (K,) float64, the linking lengths as given.
    single : bool, one length given.
    relative : bool
    min_members : int
    velocities : PointSource, DeferredSource or None
        A velocity array of the snapshot, read on the worker; None when
        there are none or when they are scattered (an extra task argument).
    velocities_name : str or None
        The array name of the velocities, for a snapshot the worker must
        choose the positions of.
    velocities_label : str or None
        What the store records about the velocities.
    ids, masses : PointSource (one column of the snapshot), str (its name,
        for a snapshot the client could not see), (n,) array, or None
    member_labels : dict
        What the store records about the IDs and masses.
    open_space : bool
        ``box_size="open"``: no box, even for a snapshot that has one.
    """

    values: Any
    single: bool
    relative: bool
    min_members: int
    velocities: Any = None
    velocities_name: str | None = None
    velocities_label: str | None = None
    ids: Any = None
    masses: Any = None
    member_labels: dict | None = None
    open_space: bool = False


# --------------------------------------------------------------------------
# on the client
# --------------------------------------------------------------------------
def prepare_fof(source, values, single, relative, box_size, min_members, velocities, *,
                out, overwrite, ids=None, masses=None, columns, array, backend, name=None, storage_options=None,
                out_storage_options=None, zarr_format=3, threads=None, remote_ok=False):
    """Check a friends-of-friends job on the client; nothing is read.

    Returns
    -------
    prepared : service.Prepared (its spec's ``clusters_output`` is ``out``)
    job : FoFJob
    scattered_velocities : (n, d) numpy array or None
    """
    from ..io.paths import is_pathlike, local_path
    from ..products.catalogue import check_catalogue_output
    from ..products.fof_checks import check_velocities
    from ..products.fof_checks import check_ids, check_masses
    from ..products.snapshots import member_source, position_member, velocities_source
    from .service import prepare

    check_backend(backend)
    loc = local_path(source) if is_pathlike(source) else None
    remote = loc is not None and remote_ok and not visible_here(loc)
    if not remote:
        array = position_member(source, array, columns, velocities, storage_options)
    from ..products.fof_checks import OPEN, check_stated_box

    open_space = isinstance(box_size, str) and box_size == OPEN
    box_size = None if open_space else box_size
    # the box as every job takes it: lengths, or "snapshot" (the BoxSize
    # attribute, read here when the client sees the snapshot, else by the worker)
    prep = prepare(source, out=None, name=name, min_samples=1, backend=backend,
                   columns=columns, array=array, overwrite=overwrite,
                   storage_options=storage_options, out_storage_options=out_storage_options,
                   zarr_format=zarr_format, threads=threads, remote_ok=remote_ok,
                   clusters_out=out, box_size=box_size)
    check_catalogue_output(prep.spec.clusters_output)
    spec = prep.spec
    deferred = isinstance(spec.source, DeferredSource)
    if box_size is None and not open_space and not deferred:
        check_stated_box(None, spec.source)
    n, d = (None, None) if deferred else (spec.source.n, spec.source.d)
    job = FoFJob(values, single, relative, min_members, open_space=open_space)
    scattered = None
    if isinstance(velocities, str):
        job.velocities_name = job.velocities_label = velocities
        if deferred:
            job.velocities = DeferredSource(loc, velocities, None, storage_options)
        else:
            job.velocities = velocities_source(source, velocities, n, d, storage_options,
                                               array)
    elif velocities is not None:
        if type(velocities).__module__.startswith("cupy"):
            velocities = velocities.get()
        scattered = np.asarray(velocities)
        if not deferred:
            scattered = check_velocities(scattered, n, d)
        job.velocities_label = "array"
    job.member_labels = {}
    for key, value in (("ids", ids), ("masses", masses)):
        if isinstance(value, str):
            job.member_labels[key] = value
            setattr(job, key, value if deferred else member_source(
                source, value, n, what=key, array=array, storage_options=storage_options,
                d=1))
        elif value is not None:
            job.member_labels[key] = "array"
            if type(value).__module__.startswith("cupy"):
                value = value.get()
            value = np.asarray(value)
            if not deferred:
                value = check_ids(value, n) if key == "ids" else check_masses(value, n)
            setattr(job, key, value)
    return prep, job, scattered


def _members_here(spec, job, n):
    """The job's IDs and masses as checked (n,) arrays, read here."""
    from ..io.source import PointSource
    from ..products.fof_checks import check_ids, check_masses
    from ..products.snapshots import member_source, read_column

    out = []
    for key, check in (("ids", check_ids), ("masses", check_masses)):
        value = getattr(job, key)
        if isinstance(value, str):  # a snapshot the client could not see
            src = spec.source
            value = member_source(src.path, value, n, what=key, array=src.array,
                                  storage_options=src.storage_options, d=1)
        if isinstance(value, PointSource):
            if value.n != n:
                raise InputError(f"{key} {value.where} has {value.n} rows; the positions "
                                 f"{n}")
            value = read_column(value)
        out.append(None if value is None else check(value, n))
    return out


# --------------------------------------------------------------------------
# on the worker
# --------------------------------------------------------------------------
def compute(spec: JobSpec, job: FoFJob, points, read_seconds, box, velocities, report):
    """The catalogue of the staged points (checked in the box ``box`` by
    ``job.read``); written when the job has an output.

    Returns
    -------
    FoFStore (with an output) or FoFCatalogue (host arrays).
    """
    from ..engine import spanning_tree
    from ..products.catalogue import write_fof
    from ..products.fof import catalogue_of_tree
    from ..products.fof_checks import absolute_lengths, check_velocities

    n, d = points.shape
    if job.velocities is not None:
        src = job.velocities
        if isinstance(src, DeferredSource):
            src = src.resolve()
        if (src.n, src.d) != (n, d):
            raise InputError(f"velocities {src.where} has shape ({src.n}, {src.d}); the "
                             f"positions are ({n}, {d})")
        velocities = src.read_all()
    elif velocities is not None:
        velocities = check_velocities(np.asarray(velocities), n, d)
    ids, masses = _members_here(spec, job, n)
    lengths = absolute_lengths(np.asarray(job.values, np.float64), job.relative, points, box)
    report("tree")
    t0 = time.perf_counter()
    tree = spanning_tree(points, 1, spec.backend, box_size=box, progress=report)
    timings = {**{k: float(v) for k, v in read_seconds.items()},
               "tree": time.perf_counter() - t0}
    report("fof")
    cat = catalogue_of_tree(points, tree, lengths, job.single, job.min_members, box,
                            velocities, relative=job.relative, given=job.values,
                            timings=timings, ids=ids, masses=masses)
    if spec.clusters_output is not None:
        res = write_fof(spec.clusters_output, cat, input=spec.input,
                        velocities=job.velocities_label, job=spec.name,
                        **(job.member_labels or {}))
    else:
        res = cat.to_host()
    done(spec, report, tree)
    return res


def _choose_positions(spec: JobSpec, job: FoFJob):
    """A snapshot the client could not list: its position array chosen
    here, and a box it declares and the job did not state refused here."""
    src = spec.source
    if isinstance(src, DeferredSource) and src.array is None and src.columns is None:
        from ..products.snapshots import position_member

        src.array = position_member(src.path, None, None, job.velocities_name,
                                    src.storage_options)
    if isinstance(src, DeferredSource) and spec.box_size is None and not job.open_space:
        from ..products.fof_checks import check_stated_box

        check_stated_box(None, src.resolve())


@refusing
def fof_read_task(spec: JobSpec, job: FoFJob, *blocks):
    """The read task: the positions staged (``job.read``); (array, seconds, box)."""
    apply_settings()
    report = Reporter(spec)

    def run():
        _choose_positions(spec, job)
        return read(spec, blocks, report)

    return _reported(report, run)


@refusing
def fof_task(spec: JobSpec, job: FoFJob, staged, velocities=None):
    """The friends-of-friends task: tree, labels, catalogue, store."""
    apply_settings()
    report = Reporter(spec)

    def run():
        points, seconds, box = staged
        return compute(spec, job, points, seconds, box, velocities, report)

    return _reported(report, run)


# --------------------------------------------------------------------------
# the call
# --------------------------------------------------------------------------
def fof_service(source, values, single, relative, box_size, min_members, velocities, *,
                ids=None, masses=None, backend="auto", client=None, out=None, overwrite=False, columns=None,
                array=None, progress=None, name=None, storage_options=None,
                out_storage_options=None, zarr_format=3, threads=None, timeout=None):
    """``emst_dask.fof`` on a Dask worker (or, with ``client=False``, here
    through the same phases).  Parameters checked by ``emst_dask.fof``.

    Returns
    -------
    FoFStore with ``out``, else FoFCatalogue (host arrays).
    """
    from .client import check_outputs_reachable, client_for, workers_may_see_other_files
    from .service import cleanup, progress_callback

    if client is None and is_in_memory(source):
        client = False
    options = dict(out=out, overwrite=overwrite, ids=ids, masses=masses, columns=columns,
                   array=array, backend=backend,
                   name=name, storage_options=storage_options,
                   out_storage_options=out_storage_options, zarr_format=zarr_format,
                   threads=threads)
    args = (source, values, single, relative, box_size, min_members, velocities)
    if client is None:  # check before an embedded cluster is started for nothing
        prepare_fof(*args, **options)
    with client_for(client, inline_ok=True, backend=backend) as cl:
        prep, job, scattered = prepare_fof(*args, remote_ok=workers_may_see_other_files(cl),
                                           **options)
        spec = prep.spec
        check_outputs_reachable(cl, spec.output, spec.clusters_output)
        callback, bar = progress_callback(progress, spec.name)
        ended = None
        try:
            if cl is None:
                return _run_inline(prep, job, scattered, callback)
            return _run_on(cl, prep, job, scattered, callback, timeout)
        except BaseException as exc:
            ended = exc
            raise
        finally:
            cleanup(cl, spec, ended)
            if bar:
                bar.close()


def _run_inline(prep, job, scattered, callback):
    spec = prep.spec
    blocks = []
    if prep.scattered:
        blocks = [prep.data.data]
    elif spec.from_blocks:  # a dask array, computed here
        spec.source, spec.from_blocks = prep.data, False
    report = Reporter(spec, callback=callback, on_worker=False)

    def run():
        _choose_positions(spec, job)
        staged, seconds, box = read(spec, blocks, report)
        return compute(spec, job, staged, seconds, box, scattered, report)

    return _reported(report, run)


def _run_on(cl, prep, job, scattered, callback, timeout):
    """The job's two tasks pinned to a watched worker (``dispatch.run_watched``)."""
    from ..progress import Relay
    from .dispatch import run_watched
    from .service import _block_args

    spec = prep.spec
    deadline = None if timeout is None else time.monotonic() + timeout

    def submit(worker):
        kw = dict(pure=False, workers=[worker], allow_other_workers=False)
        blocks = _block_args(cl, prep, worker)
        extra = [] if scattered is None else \
            [scatter(cl, scattered, [worker], f"job {spec.name!r}", hash=False)]
        staged = cl.submit(fof_read_task, spec, job, *blocks, key=spec.key("read"),
                           priority=0, **kw)
        return cl.submit(fof_task, spec, job, staged, *extra, key=spec.key("fof"),
                         priority=1, **kw)

    relay = Relay(cl, spec.topic, callback) if callback else None
    try:
        with in_user_terms(spec.name, spec.clusters_output, cl):
            res = unwrap(run_watched(cl, spec, submit, deadline, spec.clusters_output))
        if relay:
            relay.wait_done()
        return res
    finally:
        if relay:
            relay.close()


__all__ = ["FoFJob", "prepare_fof", "fof_service", "fof_read_task", "fof_task", "compute"]
