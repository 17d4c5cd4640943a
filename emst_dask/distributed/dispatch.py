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

A single job (``run_watched``) is pinned and watched the same way.  Loose
restrictions are not enough there: when every worker dies at once, the
scheduler parks the job's ready task as "no-worker", and a worker that
joins later (a nanny's restart, under a new address) is never offered a
task restricted to a worker that is gone, so the job would wait forever.
"""
from __future__ import annotations

import logging
import time
from collections import deque

from ..errors import InputError, WorkerLost, WorkersPaused
from .client import no_workers_timeout, pick_worker, scheduler_workers, workers_of
from .faults import NOT_LOST, workers_died
from .paused import PauseWatch

log = logging.getLogger(__name__)

#: seconds between two looks at whether the running jobs' workers are alive
WATCH_S = 1.0

#: seconds a submission that failed on a connection waits for the scheduler
#: to see its worker leave (a SIGKILLed worker's stream breaks at once)
GONE_S = 10.0


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
    pause = PauseWatch([], "jobs")
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
                    try:
                        fut = submit_to(cl, lambda w: submit(job, w), w)
                    except WorkerGone:  # died while its input was sent
                        deaths[job] = deaths.get(job, 0) + 1
                        if deaths[job] > allowed:
                            gave_up(job, w, deaths[job], allowed)
                        else:
                            orphaned(job, w, deaths[job])
                            pending.appendleft(job)
                        continue
                    running[fut] = (job, w)
                    ac.add(fut)
            for fut in _finished(ac):
                if fut not in running:      # an orphan, cancelled below
                    continue
                job, _ = running.pop(fut)
                if finish(job, fut):
                    pending.appendleft(job)
            info = scheduler_workers(cl)
            alive = set(info)
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
            if running:  # every running job's worker paused for good: give up
                pause.places = sorted({w for _, w in running.values()})
                pause.what = "jobs " + ", ".join(
                    repr(names(j) if names else str(j)) for j, _ in running.values())
                pause.check(cl, info)
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


def wait_for_a_worker(cl, waiting, out=None):
    """Block until the cluster has a worker; a ``WorkerLost`` naming the
    ``waiting`` jobs (list of str) and the output ``out`` they did not
    write, if given, after ``distributed.scheduler.no-workers-timeout``
    (the scheduler's, else this process's, else 120 s)."""
    if workers_of(cl):
        return
    timeout = no_workers_timeout(cl)
    try:
        cl.wait_for_workers(1, timeout=timeout)
    except TimeoutError:
        names = ", ".join(repr(n) for n in waiting)
        wrote = "" if out is None else f"; {out} was not written"
        raise WorkerLost(f"no worker left to run jobs {names} within {timeout:g} s{wrote}; "
                         "their inputs are untouched: submit them again when workers are "
                         "back") from None


class WorkerGone(Exception):
    """The worker a watched job was pinned to left the cluster."""


def submit_to(cl, submit, worker):
    """``submit(worker)``; ``WorkerGone`` when it failed because ``worker``
    left the cluster meanwhile.

    Submitting scatters a job's in-memory input to its worker: a worker
    killed between being picked and receiving it breaks the scheduler's
    connection (``CommClosedError``), is gone when the scheduler records
    where the data went (``KeyError``), or, once removed, leaves no valid
    worker to scatter to (``TimeoutError``).  An error is the worker's death
    only if the scheduler sees the worker gone within ``GONE_S``; any other
    error is the caller's.
    """
    try:
        return submit(worker)
    except (InputError, WorkersPaused):  # the user's, or a verdict already
        raise
    except Exception:
        deadline = time.monotonic() + GONE_S
        while worker in scheduler_workers(cl):
            if time.monotonic() > deadline:
                raise
            time.sleep(0.1)
        raise WorkerGone(worker) from None


def watch(cl, fut, worker, deadline=None, name="job", out=None):
    """The result of ``fut``, whose tasks are pinned to ``worker``.

    Parameters
    ----------
    cl : distributed.Client
    fut : distributed.Future
    worker : str
        The address the job's tasks are pinned to.
    deadline : float, optional
        ``time.monotonic()`` value after which ``TimeoutError`` is raised.

    Raises
    ------
    WorkerGone
        ``worker`` left the cluster before ``fut`` finished (``fut`` is
        cancelled).
    TimeoutError
        At ``deadline`` (``fut`` is left running; the caller cancels it).
    WorkersPaused
        ``worker`` sat paused at its memory limit (``paused``; ``fut`` is
        cancelled).  ``name`` and ``out`` name the job and its output there.
    """
    from distributed import wait
    from distributed.utils import CancelledError

    pause = PauseWatch([worker], f"job {name!r}", out)
    while True:
        step = WATCH_S
        if deadline is not None:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError("the job did not finish within its timeout")
            step = min(step, left)
        try:
            with cl.as_current():
                wait(fut, timeout=step)
        except (TimeoutError, CancelledError):  # the future's own error comes below
            pass
        if fut.done():
            try:
                return fut.result()
            except CancelledError as exc:
                # a task whose scattered input died with the worker is cancelled
                if getattr(exc, "reason", "") in NOT_LOST or worker in workers_of(cl):
                    raise
                raise WorkerGone(worker) from None
        info = scheduler_workers(cl)
        if worker not in info:
            fut.cancel()
            raise WorkerGone(worker)
        try:
            pause.check(cl, info)
        except WorkersPaused:
            fut.cancel()
            raise


def run_watched(cl, spec, submit, deadline=None, out=None):
    """Run one job pinned to the least-loaded worker, watched.

    Parameters
    ----------
    cl : distributed.Client
    spec : job spec
        Its ``name`` (str) names the job in errors; its ``attempt`` (int)
        is counted up before a job whose worker died is submitted again
        (the task keys carry it, so they stay unique).
    submit : callable(worker) -> distributed.Future
        Submits the job's tasks pinned to ``worker`` (str); the future of
        the last.
    deadline : float, optional
        ``time.monotonic()`` value after which ``TimeoutError`` is raised.
    out : optional
        The job's output, named in a ``WorkerLost``.

    Returns
    -------
    The last task's result.  A job whose worker dies is submitted again on
    another (or the restarted) worker; ``WorkerLost`` when more workers died
    running it than ``distributed.scheduler.allowed-failures``, or when no
    worker is left within ``distributed.scheduler.no-workers-timeout``.
    """
    name = spec.name
    allowed = allowed_failures()
    deaths = 0
    while True:
        wait_for_a_worker(cl, [name], out)
        worker = pick_worker(cl)
        if worker is None:  # left between the two questions
            continue
        fut = None
        try:
            fut = submit_to(cl, submit, worker)
            return watch(cl, fut, worker, deadline, name, out)
        except WorkerGone:
            deaths += 1
            if deaths > allowed:
                raise workers_died(name, deaths, allowed, worker, out) from None
            log.warning("job %s: its worker %s left the cluster; submitting it again (%d)",
                        name, worker, deaths)
            spec.attempt += 1
        except BaseException:
            if fut is not None:
                fut.cancel()
            raise


__all__ = ["WATCH_S", "WorkerGone", "allowed_failures", "one_per_worker", "run_watched",
           "submit_to", "wait_for_a_worker", "watch"]
