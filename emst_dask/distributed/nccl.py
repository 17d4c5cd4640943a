"""NCCL between the GPU workers of one job: the shuffle's device exchange.

A communicator joins the job's workers (one rank each, in the order of the
job's worker list); it is made once per worker set and kept on each worker
for the next jobs (``communicator``).  Making one blocks until every rank
has joined, and a send or receive blocks until its peer's matching call:
both wait at most ``emst_dask.partitioned.exchange-timeout`` seconds, then
the communicator is aborted and forgotten and the step raises
``ExchangeFailed`` (the driver then shuffles through Dask instead, so a
worker that died mid-exchange costs time, never the job).
"""
from __future__ import annotations

import threading
import time

from .settings import choice

#: dask.config key: how the shuffle moves points between GPU workers,
#: "auto" (NCCL where every worker has it), "nccl" or "dask"
EXCHANGE_KEY = "emst_dask.partitioned.exchange"
#: dask.config key: seconds a rank waits for its peers (joining, each exchange)
TIMEOUT_KEY = "emst_dask.partitioned.exchange-timeout"
TIMEOUT_S = 120.0

#: {unique id: Communicator} on this worker
_COMMS: dict = {}
_LOCK = threading.Lock()


class ExchangeFailed(RuntimeError):
    """A rank did not join or did not answer in time (a worker gone, say)."""


def exchange_mode() -> str:
    """The configured ``EXCHANGE_KEY``: "auto", "nccl" or "dask"."""
    return choice(EXCHANGE_KEY, ("auto", "nccl", "dask"))


def timeout_s() -> float:
    """The configured ``TIMEOUT_KEY`` in seconds (> 0)."""
    import dask.config

    value = float(dask.config.get(TIMEOUT_KEY, TIMEOUT_S))
    if not value > 0:
        raise ValueError(f"dask config {TIMEOUT_KEY} must be a number of seconds > 0")
    return value


def available() -> bool:
    """Whether this process can join an NCCL communicator (CuPy with NCCL
    point-to-point calls, and a GPU)."""
    try:
        import cupy
        from cupy.cuda import nccl

        return nccl.get_version() >= 2700 \
            and cupy.cuda.runtime.getDeviceCount() > 0
    except Exception:
        return False


def ready(backend) -> bool:
    """Whether this worker solves boxes on its GPU with ``backend`` and can
    join an NCCL communicator."""
    from ..kernels import resolve_backend

    return resolve_backend(backend or "auto") == "cuda" and available()


def unique_id():
    """A new communicator's id (made on rank 0: it names its address)."""
    from cupy.cuda import nccl

    return nccl.get_unique_id()


class Communicator:
    """One rank of an NCCL communicator, with timeouts.

    Parameters
    ----------
    uid : the id ``unique_id`` made
    ranks, rank : int
    timeout : float, seconds
    """

    def __init__(self, uid, ranks: int, rank: int, timeout: float):
        from cupy.cuda import nccl

        self.ranks, self.rank, self.timeout = int(ranks), int(rank), float(timeout)
        made, failed = [], []

        def init():
            try:
                made.append(nccl.NcclCommunicator(self.ranks, uid, self.rank))
            except Exception as exc:  # pragma: no cover - reported below
                failed.append(exc)

        # joining blocks until every rank has joined: in a thread, so that a
        # peer that never comes costs the timeout, not the worker
        t = threading.Thread(target=init, daemon=True, name="nccl-join")
        t.start()
        t.join(self.timeout)
        if failed:
            raise ExchangeFailed(f"NCCL rank {rank} of {ranks} could not join: {failed[0]}")
        if not made:
            raise ExchangeFailed(f"NCCL rank {rank} of {ranks}: the other ranks did not join "
                                 f"within {self.timeout:g} s")
        self.comm = made[0]

    def exchange(self, send: dict, recv: dict) -> None:
        """Send ``send[q]`` (a tuple of device arrays) to every rank q and
        receive ``recv[q]`` from it, all at once; returns when they are done.

        Raises
        ------
        ExchangeFailed
            A peer did not answer within the timeout (the communicator is
            aborted: make a new one).
        """
        import cupy
        from cupy.cuda import nccl

        stream = cupy.cuda.get_current_stream()
        cupy.cuda.Device().synchronize()  # the sent arrays are written
        nccl.groupStart()
        try:
            for q in sorted(set(send) | set(recv)):
                for a in send.get(q, ()):
                    if a.nbytes:
                        self.comm.send(a.data.ptr, a.nbytes, nccl.NCCL_UINT8, q, stream.ptr)
                for a in recv.get(q, ()):
                    if a.nbytes:
                        self.comm.recv(a.data.ptr, a.nbytes, nccl.NCCL_UINT8, q, stream.ptr)
        finally:
            nccl.groupEnd()
        done = stream.record()
        deadline = time.monotonic() + self.timeout
        while not done.done:
            if time.monotonic() > deadline:
                self.abort()
                raise ExchangeFailed(f"NCCL rank {self.rank} of {self.ranks}: the exchange "
                                     f"did not finish within {self.timeout:g} s")
            time.sleep(0.0005)
        self.comm.check_async_error()

    def abort(self) -> None:
        """Abort the communicator (its pending calls end)."""
        try:
            self.comm.abort()
        except Exception:  # pragma: no cover - already broken
            pass


def communicator(uid, ranks: int, rank: int, timeout: float) -> Communicator:
    """This worker's rank of communicator ``uid`` (joined at first use)."""
    with _LOCK:
        comm = _COMMS.get(uid)
    if comm is None:
        comm = Communicator(uid, ranks, rank, timeout)
        with _LOCK:
            _COMMS[uid] = comm
    return comm


def forget(uid) -> None:
    """Drop (and abort) this worker's rank of ``uid``, if it has one."""
    with _LOCK:
        comm = _COMMS.pop(uid, None)
    if comm is not None:
        comm.abort()


def exchange_task(uid, timeout, plan, rank, place, partitioning, *splits):
    """The shuffle's step on rank ``rank``'s worker: {box: Box} on its GPU,
    and under "seconds" the wall seconds of its steps.

    ``timeout`` (seconds) bounds each wait for the peers (the driver's
    ``timeout_s``); ``place`` is the worker the rank belongs on (elsewhere
    the task refuses at once: its peers are not there to answer);
    ``splits`` are the ``steps.split_block`` results of the blocks the plan
    places on this rank, in the plan's order."""
    from ..kernels import get_kernels
    from ..partitioned.exchange import exchange_boxes
    from .worker import apply_settings

    apply_settings()
    here = _worker_address()
    if here is not None and here != place:
        raise ExchangeFailed(f"NCCL rank {rank} belongs on {place}, not on {here} (its worker "
                             "was lost after the exchange)")
    K = get_kernels("cuda")
    mine = dict(zip(plan.blocks_of(rank), splits))
    try:
        comm = communicator(uid, plan.ranks, rank, timeout)
        comm.timeout = float(timeout)
        seconds = {}
        boxes = exchange_boxes(comm, plan, rank, mine, partitioning, xp=K.xp,
                               to_device=K.to_device, synchronize=K.synchronize,
                               seconds=seconds)
        boxes["seconds"] = seconds
        return boxes
    except ExchangeFailed:
        forget(uid)
        raise
    except Exception as exc:  # a CUDA or NCCL error: this communicator is done
        forget(uid)
        raise ExchangeFailed(f"NCCL exchange on rank {rank}: {exc}") from exc


def split_task(block, partitioning, frame, exponent):
    """``partitioned.exchange.split_block_xp`` on this worker's GPU."""
    from ..kernels import get_kernels
    from ..partitioned.exchange import split_block_xp
    from .worker import apply_settings

    apply_settings()
    K = get_kernels("cuda")
    return split_block_xp(K.xp, K.to_device, block, partitioning, frame, exponent)


def _worker_address():
    """This worker's address (None outside a worker)."""
    try:
        from distributed import get_worker

        return get_worker().address
    except ValueError:
        return None


def forget_task(uid) -> None:
    """``forget`` as a task (the driver's clean-up after a failed exchange)."""
    forget(uid)
