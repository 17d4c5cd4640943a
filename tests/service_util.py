"""Helpers of the Dask-service tests: snapshots on disk and tree checks."""
from __future__ import annotations

import os
import socket
import subprocess
import sys
import time

import numpy as np
import zarr

import emst_dask
from emst_dask.io.edge_store import EdgeStore
from oracle import check_spanning_tree, edge_set

#: below this, results are also held to the brute-force oracle (O(n^2))
ORACLE_N = 1500


def cloud(n, d=3, seed=0, dtype=np.float32):
    """Uniform points (distinct distances: a unique tree the oracle can pin)."""
    return np.random.default_rng(seed).random((n, d)).astype(dtype)


def write_snapshot(path, pts, *, layout="array", zarr_format=3, chunk_rows=250,
                   names=("x", "y", "z", "w")):
    """A Zarr snapshot of ``pts``: ``layout`` "array" (a group with one (n, d)
    array "points"), "columns" (1-D arrays x, y, z), or "bare" (the store is
    the (n, d) array itself)."""
    n, d = pts.shape
    path = os.fspath(path)
    if layout == "bare":
        a = zarr.create_array(path, shape=(n, d), chunks=(chunk_rows, d), dtype=pts.dtype,
                              zarr_format=zarr_format)
        a[...] = pts
        return path
    g = zarr.open_group(path, mode="w", zarr_format=zarr_format)
    if layout == "array":
        g.create_array("points", shape=(n, d), chunks=(chunk_rows, d),
                       dtype=pts.dtype)[...] = pts
    elif layout == "columns":
        for j in range(d):
            g.create_array(names[j], shape=(n,), chunks=(chunk_rows,),
                           dtype=pts.dtype)[...] = pts[:, j]
    else:  # pragma: no cover
        raise ValueError(layout)
    g.attrs["snapshot"] = True
    return path


def as_tree(result):
    return result.load() if isinstance(result, EdgeStore) else result


def assert_same_tree(result, pts, min_samples=1, *, reference=None):
    """``result`` (SpanningTree or EdgeStore) is a spanning tree of ``pts``
    with the edges and total weight of the in-memory CPU ``emst`` (and, for
    small clouds, passes the brute-force oracle)."""
    tree = as_tree(result)
    ref = reference or emst_dask.emst(pts, min_samples=min_samples, backend="cpu")
    n = len(pts)
    assert tree.n_points == n
    assert tree.n_edges == max(n - 1, 0)
    if n <= ORACLE_N:
        check_spanning_tree(tree, pts, min_samples, certify=n <= 600)
    else:
        _assert_spanning(tree, n)
    assert edge_set(tree.source, tree.target) == edge_set(ref.source, ref.target)
    if tree.backend == ref.backend:
        assert tree.total_weight == ref.total_weight, (tree.total_weight, ref.total_weight)
    else:
        # GPU workers: the same edges; a distance or core distance may differ
        # from the CPU's in its last bit (fused multiply-adds on the device)
        rtol = 64 * np.finfo(ref.weight.dtype).eps
        assert np.isclose(tree.total_weight, ref.total_weight, rtol=rtol, atol=0), \
            (tree.total_weight, ref.total_weight)
    assert tree.weight.dtype == ref.weight.dtype
    return tree


def _assert_spanning(tree, n):
    parent = np.arange(n)

    def find(a):
        while parent[a] != a:
            parent[a] = parent[parent[a]]
            a = parent[a]
        return a

    for a, b in zip(tree.source.tolist(), tree.target.tolist()):
        ra, rb = find(a), find(b)
        assert ra != rb, f"edge ({a}, {b}) closes a cycle"
        parent[ra] = rb


def no_tmp_siblings(path):
    parent, base = os.path.split(os.fspath(path))
    return [f for f in os.listdir(parent) if f.startswith(f".{base}.emst-tmp-")] == []


# --------------------------------------------------------------------------
# a real scheduler and workers, as processes
# --------------------------------------------------------------------------
def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def repo_env():
    env = dict(os.environ)
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env["PYTHONPATH"] = root + os.pathsep + env.get("PYTHONPATH", "")
    env["NUMBA_NUM_THREADS"] = "1"
    return env


class ProcessCluster:
    """``dask scheduler`` + ``n`` ``dask worker`` processes on 127.0.0.1."""

    def __init__(self, tmpdir, n_workers=2, timeout=60):
        self.tmpdir = os.fspath(tmpdir)
        self.n_workers = n_workers
        self.timeout = timeout
        self.procs = []
        self.scheduler_file = os.path.join(self.tmpdir, "scheduler.json")
        self.address = None

    def _spawn(self, args, name):
        log = open(os.path.join(self.tmpdir, f"{name}.log"), "w")
        p = subprocess.Popen([sys.executable, "-m", "distributed.cli." + args[0]] + args[1:],
                             stdout=log, stderr=subprocess.STDOUT, env=repo_env(),
                             cwd=self.tmpdir)
        self.procs.append((p, log))
        return p

    def start(self):
        port = free_port()
        self._spawn(["dask_scheduler", "--host", "127.0.0.1", "--port", str(port),
                     "--no-dashboard", "--scheduler-file", self.scheduler_file], "scheduler")
        self.address = f"tcp://127.0.0.1:{port}"
        for i in range(self.n_workers):
            self._spawn(["dask_worker", self.address, "--host", "127.0.0.1",
                         "--nthreads", "1", "--name", f"w{i}", "--no-dashboard",
                         "--memory-limit", "0", "--death-timeout", "60"], f"worker{i}")
        from distributed import Client

        deadline = time.monotonic() + self.timeout
        while True:
            for p, _ in self.procs:
                if p.poll() is not None:
                    raise RuntimeError(f"a cluster process exited early:\n{self.logs()}")
            try:
                with Client(self.address, timeout="5s") as c:
                    c.wait_for_workers(self.n_workers, timeout=max(1, deadline - time.monotonic()))
                break
            except Exception:
                if time.monotonic() > deadline:
                    raise RuntimeError(f"cluster did not come up:\n{self.logs()}")
                time.sleep(0.5)
        return self

    def logs(self):
        out = []
        for f in sorted(os.listdir(self.tmpdir)):
            if f.endswith(".log"):
                with open(os.path.join(self.tmpdir, f)) as fh:
                    out.append(f"--- {f}\n{fh.read()[-3000:]}")
        return "\n".join(out)

    def stop(self):
        for p, _ in reversed(self.procs):
            if p.poll() is None:
                p.terminate()
        for p, log in reversed(self.procs):
            try:
                p.wait(timeout=15)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait(timeout=15)
            log.close()
        self.procs = []
