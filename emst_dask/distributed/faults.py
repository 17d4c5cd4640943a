"""What went wrong on a cluster, in the user's terms.

Two kinds of failure come back from workers:

* the user's: a worker finds what the client could not know (a NaN in a
  chunk, a chunk deleted after the job was checked).  A task does not
  raise it (distributed would log a "Compute Failed" traceback on the
  worker for an error that is the input's); it returns a ``Refused``, which
  the tasks after it pass on and the client raises (``unwrap``);
* the cluster's: a job whose worker died (``lost_error`` turns
  distributed's errors into ``WorkerLost``), or whose in-memory input died
  with its worker (``input_lost``: the client, which holds it, sends it
  again; else ``input_lost_error``'s ``InputLost``).
"""
from __future__ import annotations

import contextlib
import functools
import logging

from ..errors import InputError, InputLost, WorkerLost

log = logging.getLogger(__name__)

#: reasons of a cancelled future that do not mean lost data
NOT_LOST = ("scheduler-connection-lost", "scheduler-restart")


class Refused:
    """The user's error, found by a task: carried, not raised, to the client."""

    def __init__(self, exc: InputError):
        self.exc = exc

    def __repr__(self):
        return f"Refused({self.exc!r})"


def refusing(fn):
    """``fn`` as a task: a ``Refused`` argument is passed on; an InputError
    becomes a ``Refused`` result."""

    @functools.wraps(fn)
    def task(*args, **kwargs):
        for a in args:
            if isinstance(a, Refused):
                return a
        try:
            return fn(*args, **kwargs)
        except InputError as exc:
            return Refused(exc)

    return task


def unwrap(value):
    """``value``, or raise the error it carries."""
    if isinstance(value, Refused):
        raise value.exc
    return value


def unwrap_all(values):
    """``values`` (a list), raising the first carried error."""
    for v in values:
        unwrap(v)
    return values


def lost_error(name, out, exc, client=None):
    """A ``WorkerLost`` explaining ``exc`` when it means the job died with
    its workers or its scheduler (None for any other error).  ``client``:
    the job's ``distributed.Client``, if any; one no longer connected means
    the scheduler was lost, whatever error the last call met."""
    try:
        from distributed.scheduler import KilledWorker, NoValidWorkerError, NoWorkerError
    except ImportError:  # pragma: no cover
        return None
    from distributed.utils import CancelledError

    wrote = "" if out is None else f"; {out} was not written"
    if scheduler_lost(exc, client):
        later = "" if out is None else \
            (f"; {out} was not written by then, and a worker that outlives the scheduler "
             "may still write it: complete, or not at all")
        return WorkerLost(f"job {name!r}: the client lost its connection to the scheduler "
                          f"(it died, or the network failed){later}; its input is untouched: "
                          "submit it again when the scheduler is back")
    if isinstance(exc, NoWorkerError):
        return WorkerLost(f"job {name!r}: its worker died and no worker was left to rerun it "
                          f"within {exc.timeout:g} s (distributed.scheduler.no-workers-timeout)"
                          f"{wrote}; its input is untouched: submit it again when workers "
                          "are back")
    if isinstance(exc, NoValidWorkerError):
        return WorkerLost(f"job {name!r}: no worker can run it (none left, or none meets its "
                          f"restrictions) within {exc.args[4]:g} s{wrote}")
    if isinstance(exc, KilledWorker):
        return workers_died(name, exc.allowed_failures + 1, exc.allowed_failures,
                            exc.last_worker.address, out)
    if isinstance(exc, CancelledError) and getattr(exc, "reason", "") not in NOT_LOST:
        # the scheduler forgets the tasks of scattered data that died
        return input_lost_error(name, out)
    return None


def input_lost_error(name, out=None) -> InputLost:
    """The ``InputLost`` of job ``name`` (output ``out``, if any), whose
    in-memory points died with the worker that held them."""
    wrote = "" if out is None else f"; {out} was not written"
    return InputLost(f"job {name!r}: the worker that held its points died; they were in memory "
                     "(sent by the submitting client, not read from a file), lived only in "
                     f"that worker's memory and cannot be recomputed{wrote}; submit the job "
                     "again with the points, or from a file, which a job reads again when a "
                     "worker dies")


@contextlib.contextmanager
def in_user_terms(name, out, client=None):
    """Errors raised inside, as the user of job ``name`` (output ``out``)
    sees them: the user's own (``InputError``) as they are, a job that died
    with its workers or its scheduler as ``lost_error``'s ``WorkerLost``."""
    try:
        yield
    except InputError:
        raise
    except Exception as exc:  # an interrupt stays one
        lost = lost_error(name, out, exc, client)
        if lost is None:
            raise
        raise lost from exc


def scheduler_lost(exc, client=None) -> bool:
    """``client`` (if any) is no longer connected, or ``exc`` is a future
    cancelled because the connection to the scheduler was lost."""
    from distributed.utils import CancelledError

    if client is not None and getattr(client, "status", "running") != "running":
        return True
    return isinstance(exc, CancelledError) and \
        getattr(exc, "reason", "") == "scheduler-connection-lost"


def writer_may_live(exc, client=None) -> bool:
    """True when a job that ended in ``exc`` may still have a task running
    on a worker (the client timed out or was interrupted, or lost the
    scheduler): its temporaries must then be left to that task, which
    places or removes its own, for removing them under it could leave a
    store that says complete and is not."""
    if scheduler_lost(None, client):
        return True
    while exc is not None:
        if isinstance(exc, (TimeoutError, KeyboardInterrupt)) or scheduler_lost(exc):
            return True
        exc = exc.__cause__
    return False


def leave_temporaries(name, exc, client=None) -> bool:
    """``writer_may_live``, said in the log: the caller then leaves the
    job ``name``'s temporaries to its task."""
    if not writer_may_live(exc, client):
        return False
    log.warning("job %s: a task of it may still be running; its temporaries are left to it",
                name)
    return True


def workers_died(name, deaths, allowed, last, out=None) -> WorkerLost:
    """The ``WorkerLost`` of a job that ``deaths`` workers died running, more
    than ``distributed.scheduler.allowed-failures`` (``allowed``); ``last`` is
    the address of the last; ``out`` its output, if any."""
    wrote = "" if out is None else f"; {out} was not written"
    workers = "a worker" if deaths == 1 else f"{deaths} workers"
    return WorkerLost(f"job {name!r}: {workers} died while running it "
                      f"(distributed.scheduler.allowed-failures = {allowed}), the last "
                      f"{last}; the job may be what kills them (out of memory?){wrote}")


def input_lost(exc, scattered: bool) -> bool:
    """The job's scattered points died with their worker: the client, which
    still holds them, can submit the job again."""
    from distributed.utils import CancelledError

    return (scattered and isinstance(exc, CancelledError)
            and getattr(exc, "reason", "") not in NOT_LOST)
