"""One job per worker at a time: the dispatch loop of ``emst_many`` and of
the MST-statistics realisations.

A job (one task chain) is pinned to the idle worker it is given: the
scheduler may not move it.  With loose restrictions its work stealing moved
a queued first task to a worker that had just finished its own job, and two
jobs then shared that worker (and its GPU).  Pinned tasks of a dead worker
would wait for it forever, so the loop watches the workers: a dead worker's
job is cancelled and submitted again elsewhere, until more workers died
running it than ``distributed.scheduler.allowed-failures`` allows (the
scheduler's own rule for loose tasks): then the caller gives it up.
"""
from __future__ import annotations

import time
from collections import deque

from ..errors import WorkerLost
from .client import workers_of

#: seconds between two looks at whether the running jobs' workers are alive
WATCH_S = 1.0


def allowed_failures() -> int:
    """``distributed.scheduler.allowed-failures``: the deaths of workers a
    job may see (3 when unset)."""
    import dask

    return int(dask.config.get("distributed.scheduler.allowed-failures", 3))


def one_per_worker(cl, jobs, submit, finish, orphaned, gave_up, names=None):
    """Run ``jobs`` on the workers of ``cl``, at most one at a time on each.

    Parameters
    ----------
    cl : distributed.Client
    jobs : iterable of hashable
        The job ids, in the order they start.
    submit : callable(job, worker) -> distributed.Future
        Submits the job's tasks pinned to ``worker``; the future of its last.
    finish : callable(job, future) -> bool
        Called with each finished future; True puts the job back at the head
        of the queue (submitted again), an exception stops the loop (the
        running jobs are cancelled).
    orphaned : callable(job, worker, deaths)
        Called with a job whose worker left the cluster (its future is
        cancelled) before it is submitted again; ``deaths`` (int) counts the
        workers that died running it, at most ``allowed_failures()``.
    gave_up : callable(job, worker, deaths, allowed)
        Called instead when ``deaths`` exceeds ``allowed``
        (``allowed_failures()``): the job is not submitted again; an
        exception stops the loop.
    names : callable(job) -> str, optional
        A job's name in the error raised when no worker is left.
    """
    from distributed import as_completed

    pending = deque(jobs)
    running = {}     # future -> (job, worker)
    deaths = {}      # job -> workers that died running it
    allowed = allowed_failures()
    ac = as_completed(loop=cl.loop)
    try:
        while pending or running:
            if not running:
                wait_for_a_worker(cl, [names(j) if names else str(j) for j in pending])
            busy = {w for _, w in running.values()}
            for w in workers_of(cl):
                if not pending:
                    break
                if w not in busy:
                    job = pending.popleft()
                    fut = submit(job, w)
                    running[fut] = (job, w)
                    ac.add(fut)
            for fut in _finished(ac):
                if fut not in running:      # an orphan, cancelled below
                    continue
                job, _ = running.pop(fut)
                if finish(job, fut):
                    pending.appendleft(job)
            alive = set(workers_of(cl))
            for fut, (job, w) in list(running.items()):
                if w in alive or fut.done():
                    continue
                del running[fut]
                fut.cancel()
                deaths[job] = deaths.get(job, 0) + 1
                if deaths[job] > allowed:
                    gave_up(job, w, deaths[job], allowed)
                    continue
                orphaned(job, w, deaths[job])
                pending.appendleft(job)
    except BaseException:
        for fut in running:
            fut.cancel()
        raise


def _finished(ac):
    """The futures done within WATCH_S (cancelled ones too)."""
    deadline = time.monotonic() + WATCH_S
    while not ac.has_ready() and time.monotonic() < deadline:
        time.sleep(0.01)
    return ac.next_batch(block=False)


def wait_for_a_worker(cl, waiting):
    """Block until the cluster has a worker; a ``WorkerLost`` naming the
    ``waiting`` jobs (list of str) after
    ``distributed.scheduler.no-workers-timeout`` (120 s when unset)."""
    import dask
    from dask.utils import parse_timedelta

    timeout = parse_timedelta(dask.config.get("distributed.scheduler.no-workers-timeout",
                                              None)) or 120
    try:
        cl.wait_for_workers(1, timeout=timeout)
    except TimeoutError:
        names = ", ".join(repr(n) for n in waiting)
        raise WorkerLost(f"no worker left to run jobs {names} within {timeout:g} s; their "
                         "inputs are untouched: submit them again when workers are back") \
            from None


__all__ = ["WATCH_S", "allowed_failures", "one_per_worker", "wait_for_a_worker"]
