"""The Dask service on a LocalCluster of CPU worker processes: Zarr layouts
v2/v3, edge stores written by the workers, dask arrays, progress events,
task names per phase, one job per worker in a batch, errors that name the
place, and the embedded default cluster."""
from __future__ import annotations

import contextlib
import sys

import io as _pyio
import os

import numpy as np
import pytest
import zarr

import emst_dask
from emst_dask.distributed import client as service
from emst_dask import EmbeddedCluster, emst_many, get_job, list_jobs, submit
from emst_dask.io.edge_store import EdgeStore, open_edges
from emst_dask import InputError
from service_util import assert_same_tree, cloud, no_tmp_siblings, write_snapshot

distributed = pytest.importorskip("distributed")
cloudpickle = pytest.importorskip("cloudpickle")
# the worker plugin below travels by value (the workers cannot import this file)
cloudpickle.register_pickle_by_value(sys.modules[__name__])


@pytest.fixture(scope="module")
def cluster():
    # two single-threaded worker processes, one numba thread each (2-core CI)
    with EmbeddedCluster(n_workers=2, backend="cpu") as emb:
        yield emb


@pytest.fixture(scope="module")
def client(cluster):
    return cluster.client


@pytest.fixture(scope="module")
def pts():
    return cloud(1200, 3, seed=5)


@pytest.fixture(scope="module")
def ref(pts):
    return emst_dask.emst(pts, backend="cpu")


@pytest.mark.parametrize("zarr_format", [2, 3])
@pytest.mark.parametrize("layout", ["array", "columns"])
def test_zarr_layouts_on_workers(client, tmp_path, pts, ref, layout, zarr_format):
    path = write_snapshot(tmp_path / "snap.zarr", pts, layout=layout, zarr_format=zarr_format,
                          chunk_rows=300)
    tree = emst_dask.emst(path, client=client)
    assert isinstance(tree, emst_dask.SpanningTree) and isinstance(tree.source, np.ndarray)
    assert_same_tree(tree, pts, reference=ref)
    assert "read" in tree.timings and "emst" in tree.timings


def test_output_store_written_by_worker(client, tmp_path, pts, ref):
    path = write_snapshot(tmp_path / "snap.zarr", pts, layout="columns", zarr_format=3)
    out = tmp_path / "edges.zarr"
    st = emst_dask.emst(path, client=client, out=out, columns=("x", "y", "z"))
    assert isinstance(st, EdgeStore) and st.path == str(out)
    again = open_edges(out)
    assert again.attrs["input"] == f"{path}[x,y,z]"
    assert again.attrs["n"] == 1200 and again.attrs["d"] == 3
    assert again.attrs["total_weight"] == ref.total_weight
    assert again.attrs["version"] == emst_dask.__version__
    assert set(again.attrs["timings"]) >= {"read", "emst", "write"}
    assert_same_tree(again, pts, reference=ref)
    assert no_tmp_siblings(out)
    with pytest.raises(InputError, match="already exists"):
        emst_dask.emst(path, client=client, out=out)
    # zarr v2 edge store, sorted, mutual reachability
    st = emst_dask.emst(path, client=client, out=tmp_path / "k4.zarr", min_samples=4,
                        sort_by_weight=True, zarr_format=2)
    t4 = assert_same_tree(st, pts, 4)
    assert np.all(np.diff(t4.weight) >= 0)
    assert open_edges(tmp_path / "k4.zarr").core_distances.shape == (1200,)


def test_dask_and_numpy_sources(client, tmp_path, pts, ref):
    import dask.array as da

    path = write_snapshot(tmp_path / "snap.zarr", pts, layout="bare", zarr_format=2)
    arr = da.from_zarr(path)
    assert_same_tree(emst_dask.emst(arr, client=client), pts, reference=ref)
    persisted = client.persist(da.from_array(pts, chunks=(500, 2)) * 1.0)
    assert_same_tree(emst_dask.emst(persisted, client=client), pts, reference=ref)
    st = emst_dask.emst(pts, client=client, out=tmp_path / "np.zarr")
    assert_same_tree(st, pts, reference=ref)
    # a zarr object rather than a path
    assert_same_tree(emst_dask.emst(zarr.open_array(path, mode="r"), client=client), pts,
                     reference=ref)


def test_progress_events_and_bar(client, tmp_path, pts, ref, capsys):
    path = write_snapshot(tmp_path / "snap.zarr", pts)
    seen = []
    emst_dask.emst(path, client=client, out=tmp_path / "e.zarr",
                   progress=lambda phase, **info: seen.append((phase, info)))
    phases = [p for p, _ in seen]
    assert phases[0] == "start" and phases[-1] == "done"
    assert phases.index("read") < phases.index("tree") < phases.index("iteration") \
        < phases.index("write")
    its = [i for p, i in seen if p == "iteration"]
    assert [i["iteration"] for i in its] == list(range(1, ref.iterations + 1))
    assert its[-1]["components"] == 1 and its[0]["components"] < 1200
    assert seen[0][1]["n"] == 1200 and seen[0][1]["worker"].startswith("tcp://")
    reads = [i for p, i in seen if p == "read"]
    assert reads[-1]["rows"] == reads[-1]["total"] == 1200
    capsys.readouterr()
    emst_dask.emst(path, client=client, progress=True)
    err = capsys.readouterr().err
    assert "read" in err and "boruvka iteration" in err and "components=1" in err
    assert "done" in err


def test_task_names_per_phase(client, tmp_path, pts):
    path = write_snapshot(tmp_path / "snap.zarr", pts)
    with distributed.get_task_stream(client) as ts:
        emst_dask.emst(path, client=client, out=tmp_path / "e.zarr", name="phases")
    keys = sorted(t["key"] for t in ts.data)
    prefixes = [k.rsplit("-", 2)[0] for k in keys if k.endswith("-phases")]
    assert sorted(prefixes) == ["emst-boruvka", "emst-read", "emst-write"], keys
    # the dashboard groups tasks by prefix
    groups = client.run_on_scheduler(lambda dask_scheduler: sorted(dask_scheduler.task_prefixes))
    assert {"emst-read", "emst-boruvka", "emst-write"} <= set(groups)


class _ExecutingSpans(distributed.WorkerPlugin):
    """Each task's [start, stop] of execution on its worker's own clock.

    The task stream's times are shifted by each worker's estimate of its
    offset from the scheduler's clock, re-estimated at every heartbeat: two
    tasks of one worker can seem to overlap by that estimate's jitter
    (milliseconds on a loaded machine)."""

    name = "executing-spans"

    def setup(self, worker):
        self.spans = {}

    def transition(self, key, start, finish, **kwargs):
        import time

        if finish == "executing":
            self.spans[str(key)] = [time.monotonic(), None]
        elif start == "executing" and str(key) in self.spans:
            self.spans[str(key)][1] = time.monotonic()


def _executing_spans(dask_worker):
    return dict(dask_worker.plugins[_ExecutingSpans.name].spans)


def test_batch_one_job_per_worker(client, tmp_path, pts):
    clouds = [cloud(900 + 100 * i, 3, seed=20 + i) for i in range(5)]
    paths = [write_snapshot(tmp_path / f"s{i}.zarr", c, chunk_rows=256)
             for i, c in enumerate(clouds)]
    outs = [tmp_path / f"e{i}.zarr" for i in range(5)]
    # two threads a worker: a second job on a worker would run beside the first
    with EmbeddedCluster(n_workers=2, backend="cpu", threads_per_worker=2) as two:
        two.client.register_plugin(_ExecutingSpans())
        stores = emst_many(paths, outs, client=two.client)
        by_worker = two.client.run(_executing_spans)
    assert [s.path for s in stores] == [str(o) for o in outs]
    for st, c in zip(stores, clouds):
        assert_same_tree(st, c)
    # per worker, the jobs' [first start, last stop] intervals never overlap
    spans = {}
    for w, tasks in by_worker.items():
        for key, (start, stop) in tasks.items():
            assert stop is not None, f"{key} still executing on {w}"
            token = key.split("-")[2]
            lo, hi = spans.get((w, token), (start, stop))
            spans[(w, token)] = (min(lo, start), max(hi, stop))
    assert len({tok for _, tok in spans}) == 5
    assert len({w for w, _ in spans}) == 2, "both workers take jobs"
    for w in {w for w, _ in spans}:
        iv = sorted(v for (ww, _), v in spans.items() if ww == w)
        for (a0, a1), (b0, b1) in zip(iv, iv[1:]):
            assert a1 <= b0, f"two jobs at once on {w}"
    # trees back, and errors in place
    bad = tmp_path / "bad.zarr"
    b = clouds[0].copy()
    b[700, 1] = np.nan
    write_snapshot(bad, b, chunk_rows=256)
    res = emst_many([paths[0], bad, tmp_path / "missing.zarr", paths[1]], client=client,
                    errors="return")
    assert_same_tree(res[0], clouds[0])
    assert isinstance(res[1], InputError) and "chunk 2 (rows 512-767)" in str(res[1])
    assert isinstance(res[2], InputError) and "missing.zarr" in str(res[2])
    assert_same_tree(res[3], clouds[1])
    with pytest.raises(InputError, match="first bad row is 700"):
        emst_many([paths[0], bad], client=client)


def test_bad_inputs_name_the_place(client, tmp_path, pts):
    missing = tmp_path / "missing.zarr"
    with pytest.raises(InputError, match=f"{missing}: no such file or Zarr store"):
        emst_dask.emst(str(missing), client=client, out=tmp_path / "never.zarr")
    assert not (tmp_path / "never.zarr").exists()
    zarr.create_array(tmp_path / "r1.zarr", shape=(10,), dtype="f4")
    with pytest.raises(InputError, match="r1.zarr must be a 2-D array"):
        emst_dask.emst(tmp_path / "r1.zarr", client=client)
    zarr.create_array(tmp_path / "c.zarr", shape=(10, 3), dtype="c8")
    with pytest.raises(InputError, match="c.zarr has non-numeric dtype complex64"):
        emst_dask.emst(tmp_path / "c.zarr", client=client)
    # NaN inside a chunk: found on the worker before the kernels, no store left
    bad = pts.copy()
    bad[[401, 1100], 2] = np.nan
    for layout in ("array", "columns"):
        path = write_snapshot(tmp_path / f"{layout}.zarr", bad, layout=layout, chunk_rows=200)
        out = tmp_path / f"{layout}-edges.zarr"
        with pytest.raises(InputError) as exc:
            emst_dask.emst(path, client=client, out=out)
        msg = str(exc.value)
        assert path in msg and "chunk 2 (rows 400-599)" in msg and "first bad row is 401" in msg
        assert not out.exists() and no_tmp_siblings(out)
    with pytest.raises(InputError, match="min_samples=2000 is larger than the number"):
        emst_dask.emst(write_snapshot(tmp_path / "ok.zarr", pts), client=client, min_samples=2000)


def test_failed_write_on_worker_leaves_no_store(client, tmp_path, pts):
    path = write_snapshot(tmp_path / "snap.zarr", pts)
    out = tmp_path / "ro" / "edges.zarr"
    (tmp_path / "ro").mkdir()
    client.run(_break_writes)
    try:
        with pytest.raises(RuntimeError, match="simulated write failure"):
            emst_dask.emst(path, client=client, out=out)
    finally:
        client.run(_restore_writes)
    assert not out.exists() and no_tmp_siblings(out)


def _break_writes():
    from emst_dask.io import edge_store as store

    store._saved_fill = store._fill

    def boom(group, tree, *a, **k):
        group.create_array("source", shape=(len(tree.source),), dtype="i8")
        raise RuntimeError("simulated write failure")

    store._fill = boom


def _restore_writes():
    from emst_dask.io import edge_store as store

    store._fill = store._saved_fill


def test_detached_job_survives_its_client(cluster, tmp_path):
    pts = cloud(30_000, 3, seed=9)
    path = write_snapshot(tmp_path / "big.zarr", pts, chunk_rows=10_000)
    out = tmp_path / "big-edges.zarr"
    from distributed import Client, Event

    address = cluster.cluster.scheduler_address
    with Client(address, set_as_default=False) as second:
        # hold both workers, so the job is surely waiting when its client leaves
        gate = Event("detached-gate", client=second)
        blockers = [second.submit(_wait_for_gate, pure=False, workers=[w], key=f"gate-{i}")
                    for i, w in enumerate(service.workers_of(second))]
        _wait_until(lambda: sum(len(v) for v in second.processing().values()) == 2)
        first = Client(address, set_as_default=False)
        job = submit(path, out=out, client=first, name="detached-test")
        assert job.name == "detached-test" and job.status() == "queued"
        with pytest.raises(InputError, match="exists on this scheduler"):
            submit(path, out=tmp_path / "other.zarr", client=first, name="detached-test")
        first.close()  # the submitting client leaves before the job has started
        assert "detached-test" in list_jobs(second)
        again = get_job("detached-test", second)
        assert again.status() == "queued" and not out.exists()
        gate.set()
        second.gather(blockers)
        st = again.result(timeout=120)
        assert again.status() == "finished"
        assert isinstance(st, EdgeStore) and st.path == str(out)
        phases = [e["phase"] for e in again.events()]
        assert phases[0] == "start" and phases[-1] == "done" and "iteration" in phases
        again.forget()
        assert "detached-test" not in list_jobs(second)
        with pytest.raises(LookupError, match="no job named 'detached-test'"):
            get_job("detached-test", second)
    assert_same_tree(open_edges(out), pts)


@contextlib.contextmanager
def _slow_job(client, tmp_path, name, seed):
    """A detached job (30,000 points, its workers' progress reports slowed
    to 0.5 s) in its Borůvka iterations: yields (job, out, points, path)."""
    from test_faults import _slow_reports

    pts = cloud(30_000, 3, seed=seed)
    path = write_snapshot(tmp_path / "c.zarr", pts, chunk_rows=10_000)
    out = tmp_path / "cancelled.zarr"
    client.run(_slow_reports, 0.5, 0)
    try:
        job = submit(path, out=out, client=client, name=name)
        _wait_until(lambda: any(e["phase"] == "iteration" for e in job.events()), 120)
        yield job, out, pts, path
    finally:
        client.run(_slow_reports, 0, 0)


def test_cancelled_job_stops_and_leaves_nothing(cluster, client, tmp_path):
    """``Job.cancel()`` stops a detached job: Dask does not interrupt a
    running task, so the task stops at its next progress report; the
    output is never written, other clients see the job cancelled, and
    ``result()`` says so instead of blaming a dead worker."""
    from distributed import Client

    from emst_dask import JobCancelled

    with _slow_job(client, tmp_path, "cancel-test", 10) as (job, out, pts, path):
        job.cancel()
        assert job.status() == "cancelled" and job.done()
        with pytest.raises(JobCancelled, match=r"job 'cancel-test' was cancelled; .*"
                                                r"cancelled.zarr is absent"):
            job.result()
        with Client(cluster.cluster.scheduler_address, set_as_default=False) as other:
            seen = get_job("cancel-test", other)
            assert seen.status() == "cancelled" and seen.done()
        _wait_until(lambda: any(e["phase"] == "error" and "JobCancelled" in e["message"]
                                for e in job.events()), 60)
        assert not out.exists() and no_tmp_siblings(out)
        job.forget()
        assert "cancel-test" not in list_jobs(client)
    # the workers are free for the next job
    assert_same_tree(emst_dask.emst(path, client=client, out=tmp_path / "after.zarr"), pts)


def test_a_job_cancelled_by_another_client_says_so_to_the_submitter(cluster, client,
                                                                    tmp_path):
    """Cancelled from a second client (as ``emst-dask job NAME --cancel``
    does), the submitter's ``result()`` raises ``JobCancelled``, not
    ``WorkerLost``: no worker died; and ``emst-dask job NAME --wait`` prints
    one line and exits with status 1."""
    from click.testing import CliRunner
    from distributed import Client

    from emst_dask import JobCancelled
    from emst_dask.cli import main

    with _slow_job(client, tmp_path, "cancel-elsewhere", 11) as (job, out, _, _):
        address = cluster.cluster.scheduler_address
        with Client(address, set_as_default=False) as other:
            get_job("cancel-elsewhere", other).cancel()
        with pytest.raises(JobCancelled, match="job 'cancel-elsewhere' was cancelled"):
            job.result()
        res = CliRunner().invoke(main, ["job", "cancel-elsewhere", "--scheduler", address,
                                        "--wait"])
        assert res.exit_code == 1, res.output
        assert "Error: job 'cancel-elsewhere' was cancelled" in res.output
        assert "Traceback" not in res.output
        _wait_until(lambda: any(e["phase"] == "error" and "JobCancelled" in e["message"]
                                for e in job.events()), 60)
        assert not out.exists() and no_tmp_siblings(out)
        job.forget()


def test_a_finished_job_is_finished_for_a_new_client(cluster, client, pts, tmp_path):
    """A client that has just fetched a finished job's future knows nothing
    of it yet: the status comes from the scheduler, not "running"."""
    from distributed import Client

    job = submit(pts, out=tmp_path / "k.zarr", client=client, name="finished-test")
    job.result(timeout=120)
    with Client(cluster.cluster.scheduler_address, set_as_default=False) as other:
        seen = get_job("finished-test", other)
        assert seen.status() == "finished" and seen.done()
    job.forget()


def _wait_for_gate():
    from distributed import Event

    return Event("detached-gate").wait(timeout=60)


def _wait_until(cond, timeout=30):
    import time

    deadline = time.monotonic() + timeout
    while not cond():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.05)


def test_embedded_default_cluster(tmp_path, pts, ref, monkeypatch):
    """No client and no default Client: an embedded LocalCluster for the
    call, shut down after it."""
    def no_default_client():
        raise ValueError("No clients found")

    # whatever other tests left behind, this process has no default Client here
    monkeypatch.setattr(distributed, "default_client", no_default_client)
    path = write_snapshot(tmp_path / "snap.zarr", pts)
    before = _children()
    st = emst_dask.emst(path, out=tmp_path / "e.zarr", backend="cpu")
    assert_same_tree(st, pts, reference=ref)
    assert _children() <= before, "the embedded cluster's processes are gone"


def _children():
    import psutil

    out = set()
    for p in psutil.Process().children(recursive=True):
        try:
            if p.status() == psutil.STATUS_ZOMBIE:
                continue
            # multiprocessing's resource tracker lives as long as this process
            if any("resource_tracker" in a for a in p.cmdline()):
                continue
        except psutil.NoSuchProcess:
            continue
        out.add(p.pid)
    return out


def test_pick_worker_spreads_jobs(client):
    w = service.workers_of(client)
    assert len(w) == 2
    assert service.pick_worker(client) in w
    assert client.run_on_scheduler(service._job_load) == {a: 0 for a in w}


def test_submit_needs_a_cluster(tmp_path, pts):
    with pytest.raises(InputError, match="submit needs a Dask cluster"):
        submit(write_snapshot(tmp_path / "s.zarr", pts))


def test_cli_style_text_progress_is_readable():
    """The bar renders to a plain stream (as in a log file)."""
    from emst_dask.progress import ProgressBar

    buf = _pyio.StringIO()
    bar = ProgressBar("job", file=buf)
    bar("start", n=10, d=3, backend="cpu")
    bar("read", rows=10, total=10)
    bar("tree")
    bar("iteration", iteration=1, components=3)
    bar("iteration", iteration=2, components=1)
    bar("write", rows=9, total=9)
    bar("done", seconds=0.5, total_weight=1.5, n_edges=9)
    text = buf.getvalue()
    assert "job: read" in text and "job: boruvka iteration 2" in text
    assert "components=1" in text and "job: done" in text and "edges=9" in text
    assert bar.finished.is_set()
    assert os.linesep in text or "\r" in text


@pytest.mark.parametrize("where", ["here", "cluster"])
def test_a_progress_callback_that_raises_never_fails_the_job(client, pts, ref, where, caplog):
    """In this process or relayed from a worker, a callback's error is
    logged once, the callback is dropped, and the job's result is exact."""
    import logging

    calls = []

    def callback(phase, **info):
        calls.append(phase)
        if phase == "iteration":
            raise RuntimeError("boom in the user's callback")

    with caplog.at_level(logging.WARNING, logger="emst_dask.progress"):
        tree = emst_dask.emst(pts, client=client if where == "cluster" else None,
                              progress=callback)
    assert_same_tree(tree, pts, reference=ref)
    assert calls.count("iteration") == 1 and calls[-1] == "iteration", calls
    warned = [r for r in caplog.records if r.name == "emst_dask.progress"]
    assert len(warned) == 1 and "boom in the user's callback" in caplog.text


def test_an_in_memory_output_on_worker_processes_is_refused_before_any_work(client, pts):
    """A memory:// store (or a zarr MemoryStore) written by a worker in its
    own process is lost to this client: refused before any work."""
    for out in ("memory://lost.zarr", zarr.storage.MemoryStore()):
        with pytest.raises(emst_dask.OutputError, match="in-memory store"):
            emst_dask.emst(pts, out=out, client=client)
    with pytest.raises(emst_dask.OutputError, match="in-memory store"):
        emst_dask.emst(pts, out="memory://lost2.zarr", client=client, partitions=2)


def test_emst_many_refuses_one_output_reached_through_a_link(tmp_path, pts):
    """Two outputs that are one folder through a symbolic link are one
    output: refused before any work (else the second replaced the first)."""
    real = tmp_path / "real"
    real.mkdir()
    os.symlink(real, tmp_path / "link")
    with pytest.raises(InputError, match="two sources would write the same output"):
        emst_many([pts, pts[:900]], outs=[real / "e.zarr", tmp_path / "link" / "e.zarr"],
                  client=False, overwrite=True)
    assert list(real.iterdir()) == []


def test_emst_many_says_which_source_failed(pts):
    """In-memory clouds of one shape are told apart only by their place:
    errors="raise" puts the source (and its job's name) in the message."""
    clouds = [pts.copy() for _ in range(3)]
    clouds[1][17, 0] = np.nan
    with pytest.raises(InputError, match=r"source 1 \(job 'second'\): .*first bad row is 17"):
        emst_many(clouds, names=["first", "second", "third"], client=False)


def test_a_failed_submit_leaves_its_name_free(client, pts, monkeypatch):
    """submit claims the job's name on the scheduler first; if submitting
    the tasks then fails, the claim is withdrawn, so the name can be used."""
    import emst_dask.distributed.service as svc

    def boom(*args, **kwargs):
        raise RuntimeError("cannot submit (test)")

    monkeypatch.setattr(svc, "submit_chain", boom)
    with pytest.raises(RuntimeError, match="cannot submit"):
        submit(pts, client=client, name="free-again", backend="cpu")
    assert "free-again" not in list_jobs(client)
    monkeypatch.undo()
    job = submit(pts, client=client, name="free-again", backend="cpu")
    assert job.result().n_edges == len(pts) - 1
    job.forget()
