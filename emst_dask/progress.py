"""Progress of a job as the client sees it.

A job reports ``(phase, info)`` pairs; on a Dask worker they travel as Dask
events (``Worker.log_event`` on the job's topic, ``Client.subscribe_topic``
in the client), in one process they are plain calls.  Phases, in order:

=================  ============================================================
``start``          n, d, backend, worker
``read``           rows, total, blocks, block: reading and staging
``tree``           building the tree (LBVH) starts
``core_distances`` k (mutual reachability only)
``iteration``      iteration, components: one Borůvka iteration done
``compile``        message, dtype, d: a first run compiles the CPU kernels
``write``          rows, total: writing the edge store
``done``           seconds, total_weight, n_edges
``error``          message
=================  ============================================================

``ProgressBar`` turns them into one tqdm bar that changes with the phase:
rows read, edges found (n - components of n - 1, with the iteration and
component count), rows written.

A progress callback never fails a job, in this process or relayed from a
worker (``guarded``): its first exception is logged with its traceback and
it is not called again.
"""
from __future__ import annotations

import logging
import sys
import threading
import time

log = logging.getLogger(__name__)


def si(x) -> str:
    """``x`` with an SI prefix and three figures: 4.62e9 -> "4.62 G", 512 -> "512"."""
    x = float(x)
    for prefix in ("", " k", " M", " G", " T"):
        if abs(x) < 999.5:
            return f"{x:.3g}{prefix}"
        x /= 1000.0
    return f"{x:.3g} P"


def guarded(callback):
    """``callback(phase, **info)`` that never fails the job it follows: its
    first exception is logged, with its traceback, and it is not called
    again (an interrupt still stops the job).  None stays None."""
    if callback is None or getattr(callback, "_guarded", False):
        return callback
    failed = []

    def call(phase, **info):
        if failed:
            return
        try:
            callback(phase, **info)
        except Exception:
            failed.append(phase)
            log.warning("the progress callback raised at phase %r; it is not called again, "
                        "and the job goes on", phase, exc_info=True)

    call._guarded = True
    return call


class ProgressBar:
    """A tqdm bar driven by ``bar(phase, **info)``; thread-safe."""

    def __init__(self, label: str = "emst", file=None, leave: bool = True,
                 mininterval: float = 0.2):
        from tqdm.auto import tqdm

        self._tqdm = tqdm
        self.label = label
        self.file = file if file is not None else sys.stderr
        self.leave = leave
        self.mininterval = mininterval
        self.bar = None
        self.phase = None
        self.n = None
        self.lock = threading.Lock()
        self.finished = threading.Event()

    def _open(self, desc, total, unit, since=None):
        # our own counts and rate (``si``): tqdm's read "4.62Gedges/s"
        fmt = ("{desc}: {percentage:3.0f}%|{bar}| [{elapsed}<{remaining}{postfix}]"
               if total else "{desc} [{elapsed}{postfix}]")
        if self.bar is None:
            self.bar = self._tqdm(total=total, desc=desc, unit=unit, file=self.file,
                                  leave=self.leave, mininterval=self.mininterval,
                                  dynamic_ncols=True, bar_format=fmt)
        else:
            self.bar.reset(total=total)
            self.bar.total = total
            self.bar.unit = unit
            self.bar.bar_format = fmt
            self.bar.set_postfix_str("", refresh=False)
            self.bar.set_description_str(desc, refresh=False)
        self.unit = unit
        self.since = time.monotonic() if since is None else since

    def _counts(self, extra=""):
        """Postfix: rows or edges so far of the total, their rate, ``extra``."""
        n, total = self.bar.n, self.bar.total
        seconds = time.monotonic() - self.since
        parts = [f"{si(n)}/{si(total)} {self.unit}" if total else f"{si(n)} {self.unit}"]
        if n and seconds > 0:
            parts.append(f"{si(n / seconds)} {self.unit}/s")
        if extra:
            parts.append(extra)
        self.bar.set_postfix_str(", ".join(parts), refresh=False)

    def __call__(self, phase, **info):
        with self.lock:
            self._update(phase, info)

    def _update(self, phase, info):
        if phase == "start":
            self.n = info.get("n")
            self._open(f"{self.label}: start", None, "it")
            self.bar.set_postfix_str(
                f"n={info.get('n')} d={info.get('d')} backend={info.get('backend')}",
                refresh=True)
        elif phase == "read":
            if self.phase != "read":
                self._open(f"{self.label}: read", info.get("total"), "rows")
            self.bar.n = info.get("rows", 0)
            self._counts()
            self.bar.refresh()
        elif phase == "compile":  # a first run: the kernels compile before the tree moves
            self._tqdm.write(str(info.get("message", "")), file=self.file)
            self._open(f"{self.label}: compiling kernels (first run)", None, "it")
            self.bar.refresh()
            return  # the bar goes on from the phase before
        elif phase in ("tree", "core_distances"):
            desc = "tree build" if phase == "tree" else "core distances"
            self._open(f"{self.label}: {desc}", None, "it")
            if phase == "tree":
                self.tree_started = time.monotonic()
            self.bar.refresh()
        elif phase in ("iteration", "frozen"):
            n = self.n or 0
            if self.phase not in ("iteration", "frozen"):
                # the rate counts from the tree build on: the first iteration
                # finds half the edges a moment after its bar opens
                self._open(f"{self.label}: boruvka", max(n - 1, 0), "edges",
                           since=getattr(self, "tree_started", None))
            comps = int(info.get("components", 0))
            self.bar.set_description_str(
                f"{self.label}: boruvka iteration {info.get('iteration', '')}", refresh=False)
            self.bar.n = max(n - comps, 0)
            self._counts(f"components={comps}")
            self.bar.refresh()
        elif phase == "write":
            if self.phase != "write":
                self._open(f"{self.label}: write", info.get("total"), "rows")
            self.bar.n = info.get("rows", 0)
            self._counts()
            self.bar.refresh()
        elif phase in ("done", "error"):
            if self.bar is None:
                self._open(self.label, None, "it")
            if phase == "done":
                self.bar.set_description_str(f"{self.label}: done", refresh=False)
                self.bar.set_postfix_str(
                    f"edges={info.get('n_edges')} total_weight={info.get('total_weight')} "
                    f"seconds={info.get('seconds', 0):.2f}", refresh=False)
            else:
                self.bar.set_description_str(f"{self.label}: failed", refresh=False)
                self.bar.set_postfix_str(str(info.get("message", ""))[:120], refresh=False)
            self.close()
            self.finished.set()
        self.phase = phase

    def close(self):
        """Refresh and close the current bar, if any."""
        if self.bar is not None:
            self.bar.refresh()
            self.bar.close()


def with_notices(callback):
    """``callback`` that also shows the notices a job sends (a first run's
    ``compile`` message) when it is not a ``ProgressBar``, which shows them
    itself: as warnings of the ``emst_dask`` logger (stderr unless logging is
    set up otherwise).  Never None: a job followed by nothing else still
    tells its user that it is compiling."""
    if isinstance(callback, ProgressBar):
        return callback

    def call(phase, **info):
        if phase == "compile":
            logging.getLogger("emst_dask").warning(info.get("message", ""))
        if callback is not None:
            callback(phase, **info)

    return call


class Relay:
    """Call ``callback(phase, **info)`` for every event on a Dask topic.

    Subscribes before the job is submitted; ``wait_done`` waits (bounded)
    for the job's last event, which may arrive just after its result.
    """

    def __init__(self, client, topic: str, callback):
        self.client = client
        self.topic = topic
        self.callback = guarded(callback)
        self.last = None
        self.done = threading.Event()
        client.subscribe_topic(topic, self._handle)

    def _handle(self, event):
        _, msg = event
        if not isinstance(msg, dict):
            return
        msg = dict(msg)
        phase = msg.pop("phase", None)
        msg.pop("job", None)
        msg.pop("time", None)
        if phase != "start":
            msg.pop("worker", None)  # the scheduler stamps every worker event
        if phase is None:
            return
        self.last = phase
        try:
            self.callback(phase, **msg)
        finally:
            if phase in ("done", "error"):
                self.done.set()

    def wait_done(self, timeout: float = 5.0):
        """Wait up to ``timeout`` seconds for the job's "done" or "error" event."""
        self.done.wait(timeout)

    def close(self):
        """Unsubscribe from the topic (a closing client's error is ignored)."""
        try:
            self.client.unsubscribe_topic(self.topic)
        except Exception:  # the client may already be closing
            pass


def now() -> float:
    """The wall-clock time, ``time.time()``."""
    return time.time()
