"""Jobs on workers that sit paused at their memory limit.

Dask pauses a worker whose process passes ``distributed.worker.memory.pause``
of its memory limit: it starts no task until its memory falls again.  When
what fills it is the job's own data (nothing to spill, or spilling off),
it never falls, and a job waiting on that worker would wait for good.  The
jobs' watch loops ask ``PauseWatch.check`` each time they look: once every
worker the job can use has been paused without a break for
``emst_dask.jobs.paused-timeout`` seconds (default 300; 0 turns the check
off), it raises ``WorkersPaused`` naming them and their memory, and the
caller cancels the job.
"""
from __future__ import annotations

import time

from ..errors import WorkersPaused
from .client import scheduler_workers

#: dask.config key: seconds the job's workers may sit paused before it is given up
PAUSED_KEY = "emst_dask.jobs.paused-timeout"
PAUSED_S = 300.0
#: seconds between two looks while waiting for a paused worker
POLL_S = 1.0


def paused_timeout() -> float:
    """The configured ``PAUSED_KEY`` in seconds (0: never give up)."""
    import dask.config

    value = float(dask.config.get(PAUSED_KEY, PAUSED_S) or 0.0)
    if value < 0:
        raise ValueError(f"dask config {PAUSED_KEY} must be >= 0 seconds, got {value!r}")
    return value


class PauseWatch:
    """Watches the workers a job can run on for a pause that does not end.

    Parameters
    ----------
    places : list of str
        The workers' addresses.
    what : str
        The job, as errors name it.
    out : optional
        Its output, named in the error as not written.
    """

    def __init__(self, places, what: str, out=None):
        self.places = list(places)
        self.what = what
        self.out = out
        self.since = None

    def check(self, client, info=None) -> bool:
        """Raise ``WorkersPaused`` once every one of the job's workers still
        in the cluster (every worker, for an empty ``places``) has been
        paused without a break for the timeout; else whether they all are
        paused now.  ``info``: ``scheduler_workers(client)`` when the caller
        has just asked for it."""
        limit = paused_timeout()
        if not limit:
            return False
        if info is None:
            info = scheduler_workers(client)
        here = [w for w in (self.places or list(info)) if w in info]
        paused = [w for w in here if str(info[w].get("status", "")).lower() == "paused"]
        if not here or len(paused) < len(here):
            self.since = None
            return False
        now = time.monotonic()
        if self.since is None:
            self.since = now
            return True
        if now - self.since < limit:
            return True
        wrote = "" if self.out is None else f"; {self.out} was not written"
        raise WorkersPaused(
            f"{self.what}: its worker(s) sat paused at Dask's memory limit for {limit:g} s "
            f"({_memory(info, paused)}); a paused worker starts no task, and the job was "
            f"cancelled{wrote}. Give the workers more memory (memory_limit), split the "
            f"cloud over them (partitions=), or wait longer ({PAUSED_KEY})")


def scatter(client, data, workers, what: str, out=None, **kw):
    """``client.scatter(data, workers=workers, **kw)`` once one of
    ``workers`` (None: any) is not paused: Dask scatters to running workers
    only, and to paused ones times out with "No valid workers found";
    ``WorkersPaused`` when they stay paused for the timeout."""
    watch = PauseWatch(workers or [], what, out)
    while watch.check(client):
        time.sleep(POLL_S)
    return client.scatter(data, workers=workers, **kw)


def _memory(info: dict, workers: list) -> str:
    """'ADDR: USED of LIMIT GB' for each worker, as the scheduler last saw it."""
    out = []
    for w in workers:
        used = (info[w].get("metrics") or {}).get("memory")
        limit = info[w].get("memory_limit")
        if used is not None and limit:
            out.append(f"{w}: {used / 1e9:.2f} of {limit / 1e9:.2f} GB")
        else:
            out.append(w)
    return "; ".join(out)
