"""Every worker of the cluster killed at once, in the middle of a job.

A task restricted to a worker that died is never offered to a worker that
joins later, so a job whose tasks were restricted, loosely or not, to
workers that all died would wait forever.  Here the workers' processes are
SIGKILLed together while their nannies live on and restart them under new
addresses: a single job (from a Zarr snapshot or in-memory points), a
partitioned job, a detached job and a FoF job each run again on the
restarted workers and give the exact answer; with no worker coming back, a
job ends in a ``WorkerLost`` within the no-workers timeout; with
``allowed-failures = 0``, at the first death.  A scheduler killed in the
middle of a job ends it at once in a ``WorkerLost`` that says so.
"""
from __future__ import annotations

import logging
import os
import signal
import threading
import time

import numpy as np
import pytest

import emst_dask
from emst_dask import WorkerLost
from emst_dask.distributed.client import workers_of
from emst_dask.io.edge_store import open_edges
from service_util import assert_same_tree, cloud, write_snapshot
from test_faults import _slow_phase1, _slow_reports

distributed = pytest.importorskip("distributed")


@pytest.fixture(scope="module")
def snap(tmp_path_factory):
    d = tmp_path_factory.mktemp("all-workers")
    pts = cloud(20000, 3, seed=72)
    return write_snapshot(d / "snap.zarr", pts, chunk_rows=5000), pts, \
        emst_dask.emst(pts, backend="cpu")


@pytest.fixture
def client():
    from distributed import Client, LocalCluster

    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                      dashboard_address=None, memory_limit=0) as lc, \
            Client(lc, set_as_default=False) as c:
        c.wait_for_workers(2, timeout=60)
        yield c


def _kill_while(client, call, marker, kill, settle=0.0, timeout=180):
    """Run ``call()`` in a thread; once a task whose key holds ``marker``
    runs (a fixed delay lets a fast machine finish first), and ``settle``
    seconds later, ``kill()``; the call's {"result": ...} or {"error": ...}
    once it ends (within ``timeout`` seconds)."""
    res = {}

    def run():
        try:
            res["result"] = call()
        except Exception as exc:  # pragma: no cover - shown by the asserts
            res["error"] = exc

    th = threading.Thread(target=run)
    th.start()
    deadline = time.monotonic() + 120
    while not any(marker in str(k) for keys in client.processing().values() for k in keys):
        assert th.is_alive() and time.monotonic() < deadline, f"no {marker!r} task ran: {res}"
        time.sleep(0.05)
    time.sleep(settle)
    kill()
    th.join(timeout)
    assert not th.is_alive(), "the job hangs after the kill"
    return res


def _kill_all_while(client, call, marker, settle=0.0, for_good=False):
    """``_kill_while`` SIGKILLing every worker process (the nannies restart
    them), or with ``for_good`` scaling the cluster to no workers."""
    def kill():
        if for_good:  # LocalCluster's nannies live in this process: no SIGKILL
            client.cluster.scale(0)
        else:
            for pid in client.run(os.getpid).values():
                os.kill(pid, signal.SIGKILL)

    return _kill_while(client, call, marker, kill, settle)


def test_single_job_runs_again_after_every_worker_died(client, snap, tmp_path, caplog):
    caplog.set_level(logging.WARNING, logger="emst_dask.distributed.dispatch")
    path, pts, ref = snap
    client.run(_slow_reports, 0.3, 0)
    out = tmp_path / "single.zarr"
    res = _kill_all_while(client, lambda: emst_dask.emst(path, client=client, out=out,
                                                         name="all-dead"),
                          "emst-boruvka", settle=0.5)
    assert "error" not in res, res.get("error")
    assert_same_tree(open_edges(res["result"]), pts, reference=ref)
    assert "job all-dead: its worker" in caplog.text and "submitting it again (1)" \
        in caplog.text
    assert not [f for f in os.listdir(tmp_path) if "emst-tmp" in f]


def test_in_memory_job_runs_again_after_every_worker_died(client, snap):
    _, pts, ref = snap
    client.run(_slow_reports, 0.3, 0)
    res = _kill_all_while(client, lambda: emst_dask.emst(pts, client=client),
                          "emst-boruvka", settle=0.5)
    assert "error" not in res, res.get("error")
    assert_same_tree(res["result"], pts, reference=ref)


def test_partitioned_job_runs_again_after_every_worker_died(client, snap, tmp_path, caplog):
    caplog.set_level(logging.WARNING, logger="emst_dask.distributed.partitioned")
    path, pts, ref = snap
    client.run(_slow_phase1, 1.0)
    out = tmp_path / "part.zarr"
    res = _kill_all_while(client, lambda: emst_dask.emst(path, client=client, partitions=2,
                                                         out=out), "-solve-")
    assert "error" not in res, res.get("error")
    assert_same_tree(open_edges(res["result"]), pts, reference=ref)
    assert "left the cluster; running it again (1)" in caplog.text
    assert not [f for f in os.listdir(tmp_path) if "emst-tmp" in f]


def test_detached_job_runs_again_after_every_worker_died(client, snap, tmp_path):
    path, pts, ref = snap
    client.run(_slow_reports, 0.3, 0)
    out = tmp_path / "detached.zarr"
    job = emst_dask.submit(path, out=out, client=client, name="detached-all-dead")
    res = _kill_all_while(client, lambda: job.result(timeout=150), "emst-boruvka", settle=0.5)
    job.forget()
    assert "error" not in res, res.get("error")
    assert_same_tree(open_edges(res["result"]), pts, reference=ref)


def test_fof_job_runs_again_after_every_worker_died(client, snap):
    path, pts, _ = snap
    from scipy.sparse.csgraph import connected_components
    from scipy.spatial import cKDTree

    b = 0.02
    client.run(_slow_reports, 0.3, 0)
    res = _kill_all_while(client, lambda: emst_dask.fof(path, b, relative=False,
                                                        min_members=1, client=client),
                          "emst-fof", settle=0.5)
    assert "error" not in res, res.get("error")
    pairs = cKDTree(pts.astype(np.float64)).query_pairs(b, output_type="ndarray")
    import scipy.sparse as sp

    g = sp.coo_matrix((np.ones(len(pairs)), (pairs[:, 0], pairs[:, 1])), shape=(len(pts),) * 2)
    _, want = connected_components(g, directed=False)
    got = np.asarray(res["result"].labels)
    # the same partition of the rows
    assert len(np.unique(got)) == len(np.unique(want))
    assert len(np.unique(got * (want.max() + 1) + want)) == len(np.unique(want))


def test_no_worker_back_is_a_clear_error(client, snap):
    import dask

    path, _, _ = snap
    client.run(_slow_reports, 0.3, 0)
    with dask.config.set({"distributed.scheduler.no-workers-timeout": "2s"}):
        t0 = time.monotonic()
        res = _kill_all_while(client, lambda: emst_dask.emst(path, client=client,
                                                             name="nobody-back"),
                              "emst-boruvka", settle=0.5, for_good=True)
    assert isinstance(res.get("error"), WorkerLost), res
    assert "no worker left to run jobs 'nobody-back' within 2 s" in str(res["error"])
    assert time.monotonic() - t0 < 60
    assert not workers_of(client)


def test_single_job_gives_up_at_allowed_failures(client, snap):
    import dask

    path, _, _ = snap
    client.run(_slow_reports, 0.3, 0)
    with dask.config.set({"distributed.scheduler.allowed-failures": 0}):
        res = _kill_all_while(client, lambda: emst_dask.emst(path, client=client,
                                                             name="give-up"),
                              "emst-boruvka", settle=0.5)
    assert isinstance(res.get("error"), WorkerLost), res
    assert "'give-up': a worker died while running it" in str(res["error"])
    assert "allowed-failures = 0" in str(res["error"])


@pytest.mark.parametrize("partitions", [None, 2], ids=["single", "partitioned"])
def test_scheduler_killed_mid_job_is_a_clear_error(tmp_path, snap, partitions):
    """The scheduler dies (a separate process, SIGKILL): the job ends at once
    in a ``WorkerLost`` saying the connection to the scheduler was lost and
    naming the output, which is absent or complete, never half-written."""
    from distributed import Client

    from service_util import ProcessCluster
    from test_faults import _store_state

    path, _, _ = snap
    (tmp_path / "cluster").mkdir()
    pc = ProcessCluster(tmp_path / "cluster", n_workers=2).start()
    try:
        with Client(pc.address, set_as_default=False) as c:
            c.run(_slow_reports, 0.3, 0)  # slow where the scheduler is killed
            c.run(_slow_phase1, 3.0)
            out = tmp_path / "edges.zarr"
            marker = "-solve-" if partitions else "emst-boruvka"
            res = _kill_scheduler_while(c, pc, lambda: emst_dask.emst(
                path, client=c, out=out, partitions=partitions), marker)
            assert isinstance(res.get("error"), WorkerLost), res
            msg = str(res["error"])
            assert "lost its connection to the scheduler" in msg and "edges.zarr" in msg, msg
            # a worker that outlives the scheduler may still place the store:
            # complete and readable, or absent, never one that says complete and is not
            for pause in (2, 0):
                assert _store_state(out) in ("absent", "complete")
                if _store_state(out) == "complete":
                    assert open_edges(out).attrs["n_edges"] == len(snap[1]) - 1
                time.sleep(pause)
    finally:
        pc.stop()


def _kill_scheduler_while(c, pc, call, marker):
    """``_kill_while`` SIGKILLing the scheduler of the ProcessCluster ``pc``;
    the call ends within the client's reconnection attempt (30 s) and some."""
    t0 = time.monotonic()
    res = _kill_while(c, call, marker, pc.procs[0][0].kill, settle=0.5, timeout=150)
    assert time.monotonic() - t0 < 150
    return res


def test_any_error_of_a_disconnected_client_is_the_lost_scheduler():
    """Under load, a call of the job's may meet the dead scheduler before any
    future is cancelled (the client reconnects for 30 s, then its connection
    pool is closed): the job's error still says what happened."""
    from types import SimpleNamespace

    from emst_dask.distributed.faults import lost_error

    err = lost_error("j", "out.zarr", RuntimeError("ConnectionPool is closed"),
                     SimpleNamespace(status="closed"))
    assert isinstance(err, WorkerLost)
    assert "lost its connection to the scheduler" in str(err) and "out.zarr" in str(err)
    assert lost_error("j", None, RuntimeError("boom"), SimpleNamespace(status="running")) \
        is None


def test_a_task_that_may_still_run_keeps_its_temporaries():
    """After a timeout, an interrupt or the scheduler's loss a worker may
    still be writing the job's temporary: removing it under the writer left
    a store marked complete without its arrays' metadata.  Only a job known
    to have ended has its temporaries removed by the client."""
    from types import SimpleNamespace

    from distributed.utils import CancelledError

    from emst_dask.distributed.faults import writer_may_live

    up, down = SimpleNamespace(status="running"), SimpleNamespace(status="connecting")
    assert writer_may_live(TimeoutError(), up)
    assert writer_may_live(KeyboardInterrupt(), up)
    assert writer_may_live(None, down)
    lost = WorkerLost("x")
    lost.__cause__ = CancelledError("k")
    lost.__cause__.reason = "scheduler-connection-lost"
    assert writer_may_live(lost, up)
    assert not writer_may_live(None, up)
    assert not writer_may_live(ValueError("a task's own error"), up)
    assert not writer_may_live(WorkerLost("its workers died"), up)


@pytest.mark.parametrize("errors", ["return", "raise"])
def test_scheduler_killed_mid_batch_ends_every_unfinished_job(tmp_path, snap, errors):
    """The scheduler dies while a batch runs: every job not finished (those
    running and those waiting) ends at once in a ``WorkerLost`` saying so,
    in its place (``errors="return"``), or in one naming them all; no
    output is left half-written."""
    from distributed import Client

    from service_util import ProcessCluster
    from test_faults import _store_state

    path, _, _ = snap
    (tmp_path / "cluster").mkdir()
    pc = ProcessCluster(tmp_path / "cluster", n_workers=2).start()
    try:
        with Client(pc.address, set_as_default=False) as c:
            c.run(_slow_reports, 0.3, 0)
            outs = [tmp_path / f"e{i}.zarr" for i in range(4)]
            res = _kill_scheduler_while(c, pc, lambda: emst_dask.emst_many(
                [path] * 4, outs, client=c, errors=errors, names=[f"b{i}" for i in range(4)]),
                "emst-boruvka")
            if errors == "return":
                got = res.get("result")
                assert got is not None and len(got) == 4, res
                assert all(isinstance(g, WorkerLost) for g in got), got
                for i, g in enumerate(got):
                    assert f"job 'b{i}'" in str(g) and "scheduler" in str(g), g
            else:
                err = res.get("error")
                assert isinstance(err, WorkerLost), res
                assert "4 job(s) of the batch unfinished" in str(err), err
                assert all(f"'b{i}'" in str(err) for i in range(4)), err
            for out in outs:
                assert _store_state(out) in ("absent", "complete")
    finally:
        pc.stop()


def test_worker_killed_while_its_input_is_sent(client, snap, monkeypatch):
    """The worker picked for an in-memory job dies just before its points
    are scattered to it: the failed scatter is that worker's death, and the
    job runs on the restarted worker."""
    from emst_dask.distributed import service

    _, pts, ref = snap
    real, calls = service.scatter, []

    def kill_then_scatter(cl, data, workers, *a, **kw):
        calls.append(workers)
        if len(calls) == 1:
            pid = cl.run(os.getpid, workers=workers)[workers[0]]
            os.kill(pid, signal.SIGKILL)
        return real(cl, data, workers, *a, **kw)

    monkeypatch.setattr(service, "scatter", kill_then_scatter)
    tree = emst_dask.emst(pts, client=client)
    assert len(calls) >= 2 and calls[1] != calls[0]
    assert_same_tree(tree, pts, reference=ref)


def test_worker_killed_while_a_partitioned_jobs_rows_are_sent(client, snap, monkeypatch,
                                                             caplog):
    """The same in a partitioned job's read: the job runs again."""
    from emst_dask.distributed import partitioned

    caplog.set_level(logging.WARNING, logger="emst_dask.distributed.partitioned")
    _, pts, ref = snap
    real, calls = partitioned.scatter, []

    def kill_then_scatter(cl, data, workers, *a, **kw):
        calls.append(workers)
        if len(calls) == 1:
            pid = cl.run(os.getpid, workers=workers)[workers[0]]
            os.kill(pid, signal.SIGKILL)
        return real(cl, data, workers, *a, **kw)

    monkeypatch.setattr(partitioned, "scatter", kill_then_scatter)
    tree = emst_dask.emst(pts, client=client, partitions=2)
    assert f"its worker(s) {calls[0][0]} left the cluster; running it again (1)" in caplog.text
    assert_same_tree(tree, pts, reference=ref)


def test_a_failed_submission_to_a_live_worker_is_the_callers(client, monkeypatch):
    """A connection error while the worker stays in the cluster is not a
    death: it reaches the caller, after the grace of ``GONE_S``."""
    from distributed.comm import CommClosedError

    from emst_dask.distributed import dispatch

    monkeypatch.setattr(dispatch, "GONE_S", 0.3)
    worker = workers_of(client)[0]

    def submit(w):
        raise CommClosedError(f"in <TCP {w}>: Stream is closed")

    t0 = time.monotonic()
    with pytest.raises(CommClosedError, match="Stream is closed"):
        dispatch.submit_to(client, submit, worker)
    assert time.monotonic() - t0 >= 0.3
    with pytest.raises(dispatch.WorkerGone):
        dispatch.submit_to(client, submit, "tcp://127.0.0.1:9")
