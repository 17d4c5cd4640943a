"""Reaching a Dask cluster: a Client from what the user gave, and which
workers there are.

``client`` arguments across the package mean the same: a
``distributed.Client``; a scheduler address (``tcp://...``, ``tls://...``)
or scheduler file (connected for the call, then closed); ``None`` (the
default Client if there is one, else an embedded cluster for the call); or
``False`` (in this process, no Dask).
"""
from __future__ import annotations

import contextlib
import os

from ..errors import InputError, OutputError

#: seconds to wait for a scheduler that does not answer (the CLI's user
#: should not wait dask's default twice over for a typo), or
#: ``distributed.comm.timeouts.connect`` where that is shorter
CONNECT_TIMEOUT = "20s"


def connect_timeout() -> float:
    """Seconds ``connect`` waits for a scheduler (see ``CONNECT_TIMEOUT``)."""
    import dask
    from dask.utils import parse_timedelta

    mine = parse_timedelta(CONNECT_TIMEOUT)
    theirs = dask.config.get("distributed.comm.timeouts.connect", None)
    return min(mine, parse_timedelta(theirs)) if theirs else mine


def _check_tls(address: str):
    """A ``tls://`` address needs certificates from dask's configuration
    (``distributed.comm.tls``): say so before trying, not after a timeout."""
    if not address.startswith("tls://"):
        return
    from distributed.security import Security

    sec = Security()
    if not (sec.tls_ca_file and sec.tls_client_cert):
        raise InputError(
            f"the scheduler {address} speaks TLS, but no TLS certificates are configured: "
            "set distributed.comm.tls.ca-file and distributed.comm.tls.client.cert/key "
            "(DASK_DISTRIBUTED__COMM__TLS__CA_FILE, ..._CLIENT__CERT, ..._CLIENT__KEY), "
            "or pass client=distributed.Client(address, security=Security(...))")


def _read_scheduler_file(path: str) -> str:
    import json

    try:
        with open(path, encoding="utf-8") as fh:
            return str(json.load(fh)["address"])
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise InputError(f"{path}: not a Dask scheduler file ({type(exc).__name__}: "
                         f"{exc})") from None


def connect(client):
    """(Client, owned) from a Client, an address or a scheduler file.

    ``owned`` is True when this call made the Client (the caller closes it).
    Raises InputError for an unreachable scheduler, a TLS scheduler without
    certificates, or a bad argument.
    """
    from distributed import Client

    if isinstance(client, Client):
        return client, False
    if not isinstance(client, (str, os.PathLike)):
        raise InputError(f"client must be a distributed.Client, a scheduler address or a "
                         f"scheduler file, got {client!r}")
    s = os.fspath(client)
    if s.endswith(".json"):
        if not os.path.exists(s):
            raise InputError(f"{s}: no such scheduler file")
        address = _read_scheduler_file(s)
    else:
        address = s
    _check_tls(address)
    try:
        if s.endswith(".json"):
            return Client(scheduler_file=s, set_as_default=False,
                          timeout=connect_timeout()), True
        return Client(s, set_as_default=False, timeout=connect_timeout()), True
    except (OSError, TimeoutError) as exc:
        raise InputError(f"cannot reach the Dask scheduler {address}: {exc}") from None
    except (TypeError, ValueError) as exc:
        raise InputError(f"cannot connect to the Dask scheduler {address}: "
                         f"{type(exc).__name__}: {exc}") from None


@contextlib.contextmanager
def client_for(client, *, inline_ok=False, backend="auto", n_workers=None):
    """Yield the Client a call runs on (None: run in this process).

    Parameters
    ----------
    client : Client, address, scheduler file, False or None
        See the module docstring.
    inline_ok : bool
        Whether ``client=False`` may run the call in this process.
    backend : {"auto", "cpu", "cuda"}
        Of an embedded cluster.
    n_workers : int, optional
        Of an embedded cluster.
    """
    if client is False:
        if not inline_ok:
            raise InputError("this call needs a Dask cluster; client=False runs nothing")
        yield None
        return
    if client is None:
        try:
            from distributed import default_client

            yield default_client()
            return
        except ValueError:
            from .cluster import EmbeddedCluster

            with EmbeddedCluster(n_workers=n_workers, backend=backend) as emb:
                yield emb.client
            return
    cl, own = connect(client)
    try:
        yield cl
    finally:
        if own:
            cl.close()


def scheduler_workers(client) -> dict:
    """{address: the scheduler's record of the worker} (its ``status``,
    ``memory_limit``, ``metrics``), asked of the scheduler itself.

    ``Client.scheduler_info()`` returns a cache that the client's periodic
    refresh replaces with a worker-less summary, so under load it sometimes
    said "no workers".
    """
    try:
        info = client.sync(client.scheduler.identity, n_workers=-1)
    except Exception:  # older distributed
        info = client.scheduler_info()
    return dict(info.get("workers", {}))


def workers_of(client) -> list:
    """Addresses of the cluster's workers, asked of the scheduler itself
    (``scheduler_workers``)."""
    return sorted(scheduler_workers(client))


def _job_load(dask_scheduler=None):
    """Unfinished emst jobs per worker (run on the scheduler)."""
    load = {w: set() for w in dask_scheduler.workers}
    for key, ts in dask_scheduler.tasks.items():
        if not (isinstance(key, str) and key.startswith("emst-")):
            continue
        if ts.state in ("memory", "erred", "released", "forgotten"):
            continue
        token = key.split("-")[2] if key.count("-") >= 2 else key
        targets = set(ts.worker_restrictions or ())
        if ts.processing_on is not None:
            targets.add(ts.processing_on.address)
        for w in targets:
            if w in load:
                load[w].add(token)
    return {w: len(t) for w, t in load.items()}


def _no_workers_timeout(dask_scheduler=None):
    """The scheduler's ``distributed.scheduler.no-workers-timeout`` in
    seconds, or None (run on the scheduler)."""
    return getattr(dask_scheduler, "no_workers_timeout", None)


def no_workers_timeout(client) -> float:
    """Seconds a job waits for a worker: this process's
    ``distributed.scheduler.no-workers-timeout``, else the scheduler's,
    else 120."""
    import dask
    from dask.utils import parse_timedelta

    ours = parse_timedelta(dask.config.get("distributed.scheduler.no-workers-timeout", None))
    if ours:
        return float(ours)
    try:
        theirs = client.run_on_scheduler(_no_workers_timeout)
    except Exception:  # a scheduler without this package
        theirs = None
    return float(theirs) if theirs else 120.0


def pick_worker(client):
    """The worker with the fewest unfinished emst jobs (None if none yet)."""
    workers = workers_of(client)
    if not workers:
        return None
    try:
        load = client.run_on_scheduler(_job_load)
    except Exception:
        load = {w: len(k) for w, k in client.processing().items()}
    return min(workers, key=lambda w: (load.get(w, 0), w))


def workers_may_see_other_files(client) -> bool:
    """True unless the scheduler runs on this machine (then a path missing
    here is missing for the workers too, and the client says so at once)."""
    import socket
    from urllib.parse import urlparse

    if client in (None, False):
        return False
    try:
        host = urlparse(client.scheduler.address).hostname
    except Exception:
        return True
    if host in ("127.0.0.1", "localhost", "::1", None):
        return False
    try:
        mine = {socket.gethostname(), socket.getfqdn()}
        mine |= {ai[4][0] for ai in socket.getaddrinfo(socket.gethostname(), None)}
    except OSError:
        return True
    return host not in mine


def in_memory_store(target) -> bool:
    """A ``memory://`` URL or a zarr ``MemoryStore``: it lives in the
    process that writes it."""
    if isinstance(target, str):
        return target.startswith("memory://")
    try:
        from zarr.storage import MemoryStore
    except ImportError:  # pragma: no cover
        return False
    return isinstance(target, MemoryStore)


def check_outputs_reachable(client, *outputs):
    """Refuse, before any work, an in-memory output (``in_memory_store``)
    that a worker in another process would write into its own memory,
    where this client never sees it (``outputs``: ``io.Output`` or None)."""
    mem = [o for o in outputs if o is not None and in_memory_store(o.target)]
    if not mem or client in (None, False):
        return
    pids = set(client.run(os.getpid).values())
    if pids and pids != {os.getpid()}:
        raise OutputError(f"{mem[0]}: an in-memory store would be written by the worker that "
                          "runs the job, in its own process, where this client never sees "
                          "it; give a path or URL that the workers and this client share "
                          "(or run with client=False)")
