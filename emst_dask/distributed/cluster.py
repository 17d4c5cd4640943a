"""The embedded default cluster: what runs a job when no scheduler is given."""
from __future__ import annotations

import ast
import contextlib
import logging
import os
import sys
import threading

from distributed import Nanny

#: the dashboard of an embedded cluster: this machine only, any free port
DASHBOARD_ADDRESS = "127.0.0.1:0"

_environ_lock = threading.Lock()
_environ_depth = 0
_environ_saved: dict = {}


class KeepEnvironNanny(Nanny):
    """A nanny that leaves this process's environment as it was.

    distributed puts its pre-spawn settings (``OMP_NUM_THREADS=1``,
    ``MALLOC_TRIM_THRESHOLD_``, ``PYTHONHASHSEED``, ...) into the *parent's*
    ``os.environ`` so that the worker process it spawns inherits them; for an
    embedded cluster the parent is the user's own process.  While any of
    this process's nannies is starting a worker, the environment is as
    distributed wants it; once none is, it is restored.
    """

    async def instantiate(self):
        """Start the worker process under distributed's environment; ours is restored after."""
        _hold_environ()
        try:
            return await super().instantiate()
        finally:
            _release_environ()


def _hold_environ():
    global _environ_depth, _environ_saved
    with _environ_lock:
        if _environ_depth == 0:
            _environ_saved = dict(os.environ)
        _environ_depth += 1


def _release_environ():
    global _environ_depth
    with _environ_lock:
        _environ_depth -= 1
        if _environ_depth == 0:
            for k in set(os.environ) - set(_environ_saved):
                del os.environ[k]
            for k, v in _environ_saved.items():
                if os.environ.get(k) != v:
                    os.environ[k] = v


#: what to add to a script whose top level starts a process cluster
GUARD_HINT = ('put the script\'s top-level code under  if __name__ == "__main__":  (worker '
              'processes start by re-running the main module, which would run it again)')


def _is_main_guard(node) -> bool:
    """``if __name__ == "__main__":`` (either side of the ``==``)."""
    if not isinstance(node, ast.If) or not isinstance(node.test, ast.Compare):
        return False
    t = node.test
    if len(t.ops) != 1 or not isinstance(t.ops[0], ast.Eq):
        return False
    sides = [t.left, t.comparators[0]]
    names = [s.id for s in sides if isinstance(s, ast.Name)]
    texts = [s.value for s in sides if isinstance(s, ast.Constant)]
    return names == ["__name__"] and texts == ["__main__"]


def unguarded_main() -> bool:
    """Whether the main thread is running the top level of a script outside
    ``if __name__ == "__main__":``.

    Worker processes started by ``spawn`` or ``forkserver`` (distributed's
    ``distributed.worker.multiprocessing-method``) import the main script
    again; the code of such a line would run a second time in each of them,
    and start a cluster of its own there.  False for an interactive session,
    a notebook or ``python -c`` (nothing is re-imported), and whenever the
    script's source cannot be read.
    """
    main = sys.modules.get("__main__")
    path = getattr(main, "__file__", None)
    frame = sys._current_frames().get(threading.main_thread().ident)
    if not path or frame is None:
        return False
    line = None  # the main module's top-level line now running
    while frame is not None:
        if frame.f_globals is main.__dict__ and frame.f_code.co_name == "<module>":
            line = frame.f_lineno
        frame = frame.f_back
    if line is None:
        return False
    try:
        with open(path, "rb") as fh:
            tree = ast.parse(fh.read())
    except (OSError, SyntaxError, ValueError):
        return False
    return not any(_is_main_guard(node) and node.lineno <= line <= node.end_lineno
                   for node in ast.walk(tree))


def visible_gpus() -> int:
    """GPUs a LocalCUDACluster would start one worker each for."""
    vis = os.environ.get("CUDA_VISIBLE_DEVICES")
    if vis is not None:
        return len([v for v in vis.split(",") if v.strip()])
    try:
        import cupy

        return int(cupy.cuda.runtime.getDeviceCount())
    except Exception:
        return 1


class EmbeddedCluster:
    """A cluster on this machine for as long as the ``with`` block lasts.

    GPUs visible (``emst_dask.kernels.cuda_available()``) and ``backend`` not
    "cpu": a dask-cuda ``LocalCUDACluster``, one single-threaded worker per
    GPU.  Otherwise a ``LocalCluster`` of single-threaded worker processes;
    ``n_workers`` defaults to 1, which gives one job all the cores.  Either
    way the numba kernels (the CPU backend, and the host-side steps of the
    partitioned path on GPU workers) bring their own threads: each worker's
    jobs use ``cores // n_workers`` of them (``worker.WorkerSettings``), so
    workers do not oversubscribe the cores.  Nothing of this reaches this
    process's environment.

    Scheduler and dashboard listen on 127.0.0.1 only: whoever reaches a
    Dask scheduler runs code on its workers.

    Started from the top level of a script without
    ``if __name__ == "__main__":`` (``unguarded_main``), where worker
    processes would run the script again, the CPU cluster is one worker
    thread in this process instead (``processes=False``): the same trees,
    computed by the same kernels on all the cores.  A GPU cluster needs its
    processes, and is refused with what to add.

    Parameters
    ----------
    n_workers : int, optional
    backend : {"auto", "cpu", "cuda"}
    dashboard_address : str
        Default ``127.0.0.1:0``; give ``":8787"`` to serve it on every
        interface.
    silence_logs : int
        Log level of the workers.
    device_pool : float, int or None
        GPU workers: reserve this fraction of each GPU's free memory (or
        bytes) in the worker's CuPy pool at start
        (``emst_dask.distributed.worker.reserve_device_pool``), so that no
        job pays for growing it; None leaves the pool to grow on demand.
    **cluster_kwargs
        Passed to ``LocalCluster`` / ``LocalCUDACluster``.
    """

    def __init__(self, n_workers=None, *, backend="auto", dashboard_address=DASHBOARD_ADDRESS,
                 silence_logs=logging.WARNING, device_pool=None, **cluster_kwargs):
        from ..kernels import cuda_available

        self.device_pool = device_pool
        self.backend = backend
        self.gpu = backend != "cpu" and cuda_available()
        self.n_workers = n_workers
        self.dashboard_address = dashboard_address
        self.silence_logs = silence_logs
        self.cluster_kwargs = dict(cluster_kwargs)
        self.cluster = None
        self.client = None

    def start(self) -> "EmbeddedCluster":
        """Start the cluster and its client."""
        from distributed import Client

        from .worker import WorkerSettings

        cores = os.cpu_count() or 1
        kw = dict(threads_per_worker=1, dashboard_address=self.dashboard_address,
                  silence_logs=self.silence_logs, host="127.0.0.1",
                  worker_class=KeepEnvironNanny)
        inline = unguarded_main()
        if inline and (self.gpu or self.cluster_kwargs.get("processes")):
            raise RuntimeError(f"the embedded {self.kind} starts worker processes: "
                               f"{GUARD_HINT}")
        if inline:
            from distributed import LocalCluster

            # one worker thread: numba's kernels bring their own threads, and
            # two parallel launches from two threads at once are not safe
            # (in-process transport: nothing listens but the dashboard)
            kw.pop("host")
            kw.update(n_workers=1, processes=False, worker_class=None)
            kw.update({k: v for k, v in self.cluster_kwargs.items() if k != "n_workers"})
            self.cluster = LocalCluster(**kw)
            self.client = Client(self.cluster, set_as_default=False)
            return self
        if self.gpu:
            try:
                from dask_cuda import LocalCUDACluster
            except ImportError:
                raise RuntimeError("a GPU is visible but dask-cuda is not installed: pip "
                                   "install 'emst-dask[cuda]', or pass backend='cpu'") from None
            n = self.n_workers or visible_gpus()
            if self.n_workers:
                kw["n_workers"] = self.n_workers
            kw.update(self.cluster_kwargs)
            self.cluster = LocalCUDACluster(**kw)
        else:
            from distributed import LocalCluster

            n = self.n_workers or 1
            kw.update(n_workers=n, processes=True)
            kw.update(self.cluster_kwargs)
            self.cluster = LocalCluster(**kw)
        self.client = Client(self.cluster, set_as_default=False)
        self.client.register_plugin(WorkerSettings(
            numba_threads=max(1, cores // max(1, n)),
            device_pool=self.device_pool if self.gpu else None))
        return self

    @property
    def kind(self) -> str:
        """The cluster class started: "LocalCUDACluster" with a GPU, else "LocalCluster"."""
        return "LocalCUDACluster" if self.gpu else "LocalCluster"

    @property
    def dashboard_link(self):
        """The client's dashboard URL, or None before ``start``."""
        return None if self.client is None else self.client.dashboard_link

    def close(self):
        """Close the client and the cluster."""
        if self.client is not None:
            with contextlib.suppress(Exception):
                self.client.close()
        if self.cluster is not None:
            with contextlib.suppress(Exception):
                self.cluster.close()
        self.client = self.cluster = None

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.close()
        return False
