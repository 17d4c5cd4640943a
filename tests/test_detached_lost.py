"""A detached job whose in-memory points die with their worker ends in a
clear error, promptly, whoever is left to ask.

The points of ``submit(points_in_memory, ...)`` are scattered from the
submitting client to one worker: they are the only copy on the cluster.
When that client is gone (SIGKILLed here) and the worker running the job
dies, the scheduler forgets every task of the job; ``get_job`` still finds
its record, whose future can never finish.  ``Job.result()`` and
``emst-dask job NAME --wait`` must then raise ``InputLost`` saying so
within a bounded time, and ``status()`` must say "lost".  With the
submitting client alive, the same loss is told as it is (the lost worker
held the in-memory points), not as "no worker left", and the status is
"lost", not "cancelled".
"""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest

import emst_dask
from emst_dask import InputLost, WorkerLost
from service_util import assert_same_tree, cloud, no_tmp_siblings, repo_env

distributed = pytest.importorskip("distributed")
cloudpickle = pytest.importorskip("cloudpickle")
cloudpickle.register_pickle_by_value(sys.modules[__name__])

#: the bound on ``result()`` once the job is lost (seconds)
BOUND_S = 60


def _slow_reports(seconds_per_iteration):
    """(runs in a worker) every Borůvka iteration report sleeps: the job is
    slow where it is killed."""
    import time as _time

    import emst_dask.distributed.job as s

    orig = getattr(s.Reporter, "_orig_call", s.Reporter.__call__)
    s.Reporter._orig_call = orig

    def call(self, phase, **info):
        if phase in ("tree", "iteration"):
            _time.sleep(seconds_per_iteration)
        return orig(self, phase, **info)

    s.Reporter.__call__ = call
    return os.getpid()


@pytest.fixture
def client():
    from distributed import Client, LocalCluster

    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                      dashboard_address=None, memory_limit=0) as lc, \
            Client(lc, set_as_default=False) as c:
        c.wait_for_workers(2, timeout=60)
        c.run(_slow_reports, 0.5)
        yield c


def _running(client, marker="emst-boruvka", timeout=120):
    """The address of the worker running the task whose key holds ``marker``."""
    deadline = time.monotonic() + timeout
    while True:
        hits = [w for w, keys in client.processing().items()
                if any(marker in str(k) for k in keys)]
        if hits:
            return hits[0]
        assert time.monotonic() < deadline, f"no {marker!r} task ran"
        time.sleep(0.05)


def _kill_worker_process(client, address):
    """SIGKILL the worker process at ``address`` (its nanny restarts it)."""
    pid = client.run(os.getpid, workers=[address])[address]
    os.kill(pid, signal.SIGKILL)


def _submit_and_die(address, out, name):
    """A client process that submits in-memory points detached, says so, and
    waits to be killed."""
    code = textwrap.dedent(f"""
        import time
        import numpy as np
        import emst_dask
        from distributed import Client
        c = Client({address!r}, set_as_default=False)
        pts = np.random.default_rng(3).random((30000, 3)).astype(np.float32)
        emst_dask.submit(pts, out={os.fspath(out)!r}, name={name!r}, client=c)
        print("submitted", flush=True)
        time.sleep(600)
    """)
    p = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True,
                         env=repo_env())
    assert p.stdout.readline().strip() == "submitted"
    return p


def test_detached_in_memory_job_lost_with_its_client_and_worker(client, tmp_path):
    from click.testing import CliRunner

    from emst_dask.cli import main

    out = tmp_path / "detmem.zarr"
    address = client.scheduler.address
    proc = _submit_and_die(address, out, "detmem")
    try:
        worker = _running(client)
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    _kill_worker_process(client, worker)
    job = emst_dask.get_job("detmem", client)
    t0 = time.monotonic()
    with pytest.raises(InputLost) as err:
        job.result(timeout=BOUND_S + 60)
    assert time.monotonic() - t0 < BOUND_S
    msg = str(err.value)
    assert isinstance(err.value, WorkerLost)
    assert "job 'detmem'" in msg and "in memory" in msg and "cannot be recomputed" in msg
    assert f"{out} was not written" in msg
    assert "no worker" not in msg
    assert job.status() == "lost" and job.done()
    # the command line says the same in one line, promptly
    t0 = time.monotonic()
    res = CliRunner().invoke(main, ["job", "detmem", "--scheduler", address, "--wait"])
    assert time.monotonic() - t0 < BOUND_S
    assert res.exit_code == 1, res.output
    assert "job detmem: lost" in res.output
    assert "Error: job 'detmem'" in res.output and "cannot be recomputed" in res.output
    assert "Traceback" not in res.output
    assert not out.exists() and no_tmp_siblings(out)
    job.forget()


def test_detached_in_memory_job_lost_with_its_worker_client_alive(client, tmp_path):
    """The submitting client is alive and two workers are (the nanny restarts
    the killed one): the error names the lost in-memory points, and the job
    is "lost", not "cancelled"."""
    pts = cloud(30_000, 3, seed=4)
    out = tmp_path / "alive.zarr"
    job = emst_dask.submit(pts, out=out, name="detmem-alive", client=client)
    _kill_worker_process(client, _running(client))
    t0 = time.monotonic()
    with pytest.raises(InputLost) as err:
        job.result(timeout=BOUND_S + 60)
    assert time.monotonic() - t0 < BOUND_S
    msg = str(err.value)
    assert "job 'detmem-alive'" in msg and "in memory" in msg
    assert "cannot be recomputed" in msg and "no worker" not in msg
    assert len(client.scheduler_info()["workers"]) >= 1
    assert job.status() == "lost"
    assert not out.exists()
    job.forget()
    # the cluster runs the same points again once they are sent again
    client.run(_slow_reports, 0)
    assert_same_tree(emst_dask.emst(pts, client=client), pts)


def test_result_of_a_detached_job_without_workers_ends(client, tmp_path):
    """No worker left, and the scheduler sets no no-workers timeout (its
    tasks would wait for good): ``result()`` gives up after this process's
    ``distributed.scheduler.no-workers-timeout`` with a ``WorkerLost`` that
    says the job waits on the scheduler, and the job then finishes exactly
    once workers are back."""
    import dask

    from service_util import write_snapshot

    pts = cloud(30_000, 3, seed=6)
    path = write_snapshot(tmp_path / "s.zarr", pts, chunk_rows=10_000)
    out = tmp_path / "no-workers.zarr"
    job = emst_dask.submit(path, out=out, name="no-workers", client=client)
    _running(client)
    client.cluster.scale(0)
    with dask.config.set({"distributed.scheduler.no-workers-timeout": "2s"}):
        t0 = time.monotonic()
        with pytest.raises(WorkerLost, match=r"job 'no-workers': no worker was in the cluster "
                                             r"for 2 s .*runs when a worker joins") as err:
            job.result(timeout=BOUND_S + 60)
    assert not isinstance(err.value, InputLost)
    assert time.monotonic() - t0 < 30
    assert job.status() in ("queued", "running") and not job.done()
    client.cluster.scale(2)
    client.wait_for_workers(1, timeout=60)
    client.run(_slow_reports, 0)
    assert_same_tree(job.result(timeout=180), pts)
    assert job.status() == "finished"
    job.forget()
