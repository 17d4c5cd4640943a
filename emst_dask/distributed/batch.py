"""Many snapshots, one job per worker at a time (``emst_many``)."""
from __future__ import annotations

import logging
import os

from ..errors import InputError, WorkerLost
from ..io.output import check_apart
from ..io.paths import is_pathlike, local_path, locations
from ..io.source import DaskPoints
from .client import (check_outputs_reachable, client_for, connect,
                     workers_may_see_other_files, workers_of)
from .dispatch import one_per_worker
from .faults import input_lost, lost_error, scheduler_lost, unwrap, workers_died
from .job import run_inline
from .service import RESUBMIT_LOST_INPUT, cleanup, prepare, submit_chain

log = logging.getLogger(__name__)


def emst_many(sources, outs=None, *, client=None, min_samples=1, box_size=None,
              backend="auto", sort_by_weight=False, columns=None, array=None,
              overwrite=False, storage_options=None, zarr_format=3, chunk_rows=None,
              threads=None, progress=None, errors="raise", n_workers=None,
              names=None) -> list:
    """The EMST of every source, one job per worker at a time.

    Parameters
    ----------
    sources : sequence of sources (anything ``emst`` takes)
    outs : sequence of outputs, optional
        None: the trees come back; else one output per source (each worker
        writes its store; ``EdgeStore`` handles come back).
    client : see ``emst_dask.distributed.client``
        Without one, an embedded cluster of ``n_workers`` workers (default:
        one per GPU, or up to 4 CPU workers) runs the batch.
    errors : {"raise", "return"}
        "raise" stops at the first failure (cancelling the jobs under way);
        "return" puts the exception in its place and carries on.
    progress : bool or callable, optional
        True for a bar over the snapshots, or
        ``progress(phase, job=index, **info)``.
    names : sequence of str, optional
        The jobs' names.
    **options
        Those of ``emst_dask.emst`` (``box_size`` applies to every source;
        "snapshot" reads each one's own).  There is no ``partitions``: each
        job of a batch runs on one worker.

    Returns
    -------
    list, in the order of ``sources``.
    """
    if is_pathlike(sources) or isinstance(sources, bytes) or getattr(sources, "ndim", 0) == 2:
        raise InputError("emst_many takes a sequence of sources (a list of paths, arrays, "
                         f"...); got one {type(sources).__name__}: use emst for one")
    sources = list(sources)
    if errors not in ("raise", "return"):
        raise InputError(f"errors must be 'raise' or 'return', got {errors!r}")
    if outs is not None:
        outs = list(outs)
        if len(outs) != len(sources):
            raise InputError(f"{len(sources)} sources but {len(outs)} outputs")
        # resolved: two paths through a link to one folder are one output
        real = [os.path.realpath(local_path(o)) for o in outs if is_pathlike(o)]
        if len(set(real)) != len(real):
            raise InputError("two sources would write the same output")
        # no job writes into what another job of the batch reads
        inputs = locations(*sources)
        for o in outs:
            if is_pathlike(o) and local_path(o) is not None:
                check_apart(local_path(o), inputs)
    if names is not None and len(names) != len(sources):
        raise InputError(f"{len(sources)} sources but {len(names)} names")
    owned = None
    if client not in (None, False):
        client, own = connect(client)
        owned = client if own else None
    options = dict(min_samples=min_samples, box_size=box_size, backend=backend,
                   sort_by_weight=sort_by_weight,
                   columns=columns, array=array, overwrite=overwrite,
                   storage_options=storage_options, zarr_format=zarr_format,
                   chunk_rows=chunk_rows, threads=threads)
    try:
        return _emst_many(sources, outs, names, client, options, progress, errors, n_workers)
    finally:
        if owned is not None:
            owned.close()


def _emst_many(sources, outs, names, client, options, progress, errors, n_workers):
    results: list = [None] * len(sources)
    preps = {}
    remote_ok = workers_may_see_other_files(client) if client not in (None, False) else False
    for i, src in enumerate(sources):
        try:
            preps[i] = prepare(src, out=None if outs is None else outs[i],
                               name=None if names is None else names[i], remote_ok=remote_ok,
                               **options)
        except Exception as exc:
            if errors == "raise":
                _raise_named(exc, i, None if names is None else names[i])
            results[i] = exc
    if not preps:
        return results
    if n_workers is None and client is None:
        n_workers = max(1, min(len(preps), 4, (os.cpu_count() or 1) // 2))
    bar, callback = _batch_progress(progress, len(sources), len(sources) - len(preps))
    with client_for(client, inline_ok=True, backend=options["backend"],
                    n_workers=n_workers) as cl:
        try:
            if cl is None:
                _run_here(preps, results, callback, errors, bar)
            else:
                _dispatch(cl, preps, results, callback, errors, bar)
            return results
        finally:
            if bar:
                bar.close()


def _raise_named(exc, i, name):
    """Raise ``exc`` of source ``i`` saying which source it is (``_which``)."""
    named = _which(exc, i, name)
    if named is exc:
        raise exc
    raise named from exc


def _which(exc, i, name):
    """``exc`` of source ``i`` (job ``name``) saying so: an ``InputError``
    or ``WorkerLost`` again with the source in front of its message (in-memory
    clouds of one shape are told apart only by it), anything else with a
    note."""
    label = f"source {i}" + (f" (job {name!r})" if name else "")
    if isinstance(exc, (InputError, WorkerLost)):
        try:
            return type(exc)(f"{label}: {exc}")
        except Exception:  # noqa: BLE001 - a subclass with other arguments: a note
            pass
    if hasattr(exc, "add_note"):
        exc.add_note(f"in {label} of emst_many")
    return exc


def _batch_progress(progress, total, skipped):
    """(bar, callback) of ``emst_many``'s ``progress``."""
    if progress is True:
        from tqdm.auto import tqdm

        bar = tqdm(total=total, desc="snapshots", unit="job", dynamic_ncols=True)
        bar.update(skipped)

        def callback(phase, job=None, **info):
            if phase in ("start", "iteration", "write"):
                what = {"start": "read", "iteration": f"boruvka it {info.get('iteration')}",
                        "write": "write"}[phase]
                bar.set_postfix_str(f"job {job}: {what}", refresh=True)
        return bar, callback
    if callable(progress):
        return None, progress
    if progress in (None, False):
        return None, None
    raise InputError(f"progress must be True, False, None or a callable, got {progress!r}")


def _bind(callback, i):
    if callback is None:
        return None

    def cb(phase, **info):
        callback(phase, job=i, **info)
    return cb


def _run_here(preps, results, callback, errors, bar):
    """Every job in this process, in turn."""
    for i, prep in preps.items():
        try:
            if prep.spec.from_blocks and isinstance(prep.data, DaskPoints):
                prep.spec.source, prep.spec.from_blocks = prep.data, False
            blocks = [prep.data.data] if prep.spec.from_blocks else []
            results[i] = run_inline(prep.spec, blocks, progress=_bind(callback, i))
        except Exception as exc:
            if errors == "raise":
                _raise_named(exc, i, prep.spec.name)
            results[i] = exc
        if bar:
            bar.update(1)


def _dispatch(cl, preps, results, callback, errors, bar):
    """At most one job per worker (``dispatch.one_per_worker``); a job whose
    worker died, or whose in-memory input died with it, is submitted again."""
    from ..progress import Relay

    relays = []
    settled = set()
    for prep in preps.values():
        check_outputs_reachable(cl, prep.spec.output)

    def submit(i, w):
        spec = preps[i].spec
        if callback is not None and not spec.attempt:
            relays.append(Relay(cl, spec.topic, _bind(callback, i)))
        return submit_chain(cl, preps[i], w, pinned=True)

    def settle(i, value):
        results[i] = value
        settled.add(i)
        if errors == "raise" and isinstance(value, BaseException):
            _raise_named(value, i, preps[i].spec.name)
        if bar:
            bar.update(1)

    def finish(i, fut):
        spec = preps[i].spec
        try:
            value = unwrap(fut.result())
        except Exception as exc:
            if input_lost(exc, preps[i].scattered) and spec.attempt < RESUBMIT_LOST_INPUT \
                    and workers_of(cl):
                spec.attempt += 1
                return True
            if scheduler_lost(exc, cl):
                raise exc  # every unfinished job ends with it (below)
            cleanup(cl, spec)
            lost = lost_error(spec.name, spec.output, exc, cl)
            if lost is None:
                settle(i, exc)
            else:
                lost.__cause__ = exc
                settle(i, lost)
            return False
        cleanup(cl, spec)
        settle(i, value)
        return False

    def orphaned(i, w, deaths):
        spec = preps[i].spec
        spec.attempt += 1
        log.warning("job %s: its worker %s left the cluster; submitting it again (%d)",
                    spec.name, w, spec.attempt)

    def gave_up(i, w, deaths, allowed):
        spec = preps[i].spec
        cleanup(cl, spec)
        settle(i, workers_died(spec.name, deaths, allowed, w, spec.output))

    try:
        one_per_worker(cl, sorted(preps), submit, finish, orphaned, gave_up,
                       names=lambda i: preps[i].spec.name)
    except Exception as exc:
        if not scheduler_lost(exc, cl):
            raise
        _scheduler_gone(cl, preps, [i for i in sorted(preps) if i not in settled], exc,
                        settle if errors == "return" else None)
    finally:
        for r in relays:
            r.close()


def _scheduler_gone(cl, preps, unfinished, exc, settle=None):
    """The scheduler was lost: every unfinished job ends in its
    ``WorkerLost`` (``settle``: each in its place), or one ``WorkerLost``
    naming them all is raised."""
    for i in unfinished:
        spec = preps[i].spec
        cleanup(cl, spec, exc)  # left to a worker that may still write
        if settle is not None:
            lost = lost_error(spec.name, spec.output, exc, cl)
            lost.__cause__ = exc
            settle(i, lost)
    if settle is not None:
        return
    outs = [str(preps[i].spec.output) for i in unfinished if preps[i].spec.output is not None]
    names = ", ".join(repr(preps[i].spec.name) for i in unfinished)
    raise WorkerLost(
        f"the client lost its connection to the scheduler (it died, or the network "
        f"failed) with {len(unfinished)} job(s) of the batch unfinished: {names}"
        + (f"; their outputs ({', '.join(outs)}) were not written by then, and a worker "
           "that outlives the scheduler may still write one: complete, or not at all"
           if outs else "")
        + "; their inputs are untouched: submit them again when the scheduler is back"
    ) from exc
