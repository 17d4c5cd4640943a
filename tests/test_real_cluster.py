"""A real cluster: ``dask scheduler`` and two ``dask worker`` processes on
127.0.0.1 (started here, on a free port, stopped at the end), reached by
address and by scheduler file, from the API and from the command line."""
from __future__ import annotations

import shlex

import numpy as np
import pytest
from click.testing import CliRunner

import emst_dask
from emst_dask.cli import main
from emst_dask import emst_many, get_job, submit
from emst_dask.io.edge_store import EdgeStore, open_edges
from emst_dask import InputError
from service_util import ProcessCluster, assert_same_tree, cloud, write_snapshot

distributed = pytest.importorskip("distributed")


@pytest.fixture(scope="module")
def procs(tmp_path_factory):
    pc = ProcessCluster(tmp_path_factory.mktemp("cluster"), n_workers=2, timeout=90)
    try:
        yield pc.start()
    finally:
        pc.stop()


@pytest.fixture(scope="module")
def snaps(tmp_path_factory):
    d = tmp_path_factory.mktemp("snaps")
    clouds = [cloud(800, 3, seed=30), cloud(1000, 2, seed=31, dtype=np.float64)]
    paths = [write_snapshot(d / "a.zarr", clouds[0], layout="columns", zarr_format=2),
             write_snapshot(d / "b.zarr", clouds[1], layout="array", zarr_format=3)]
    return d, clouds, paths


def test_client_by_address(procs, snaps, tmp_path):
    _, clouds, paths = snaps
    # an address string: the call connects, runs, disconnects
    st = emst_dask.emst(paths[0], client=procs.address, out=tmp_path / "a-edges.zarr")
    assert isinstance(st, EdgeStore)
    assert_same_tree(open_edges(tmp_path / "a-edges.zarr"), clouds[0])
    from distributed import Client

    with Client(procs.address, set_as_default=False) as c:
        assert len(c.scheduler_info()["workers"]) == 2
        tree = emst_dask.emst(paths[1], client=c, min_samples=3)
        assert_same_tree(tree, clouds[1], 3)
        with distributed.get_task_stream(c) as ts:
            res = emst_many(paths, client=c)
        for r, pts in zip(res, clouds):
            assert_same_tree(r, pts)
        workers = {t["worker"] for t in ts.data if t["key"].startswith("emst-read-")}
        assert len(workers) == 2, "the two snapshots ran on the two workers"
        with pytest.raises(InputError, match="no such file or Zarr store"):
            emst_dask.emst(str(tmp_path / "nope.zarr"), client=c)


def test_detached_job_on_real_cluster(procs, snaps, tmp_path):
    _, clouds, paths = snaps
    from distributed import Client

    first = Client(procs.address, set_as_default=False)
    job = submit(paths[1], out=tmp_path / "b-edges.zarr", client=first)
    name = job.name
    first.close()
    with Client(scheduler_file=procs.scheduler_file, set_as_default=False) as second:
        again = get_job(name, second)
        st = again.result(timeout=120)
        assert again.status() == "finished"
        assert st.attrs["input"] == paths[1] + "/points"
        again.forget()
    assert_same_tree(open_edges(tmp_path / "b-edges.zarr"), clouds[1])


def test_cli_run_on_scheduler(procs, snaps, tmp_path):
    _, clouds, paths = snaps
    runner = CliRunner()
    out = tmp_path / "cli.zarr"
    res = runner.invoke(main, ["run", paths[0], "--out", str(out), "--scheduler", procs.address,
                               "--columns", "x,y,z", "--progress"])
    assert res.exit_code == 0, res.output
    assert "edges=799" in res.output and f"wrote {out}" in res.output
    assert "boruvka iteration" in res.output  # the bar (stderr) is in the output
    assert_same_tree(open_edges(out), clouds[0])
    res = runner.invoke(main, ["run", paths[1], "--out", str(tmp_path / "cli.npy"),
                               "--scheduler-file", procs.scheduler_file])
    assert res.exit_code == 0, res.output
    e = np.load(tmp_path / "cli.npy")
    ref = emst_dask.emst(clouds[1])
    assert e.shape == (999, 3) and np.isclose(e[:, 2].sum(), ref.total_weight, rtol=1e-12)
    res = runner.invoke(main, ["run", paths[1], "--out", str(tmp_path / "mr.zarr"),
                               "--scheduler-file", procs.scheduler_file, "-k", "2"])
    assert res.exit_code == 0, res.output
    assert_same_tree(open_edges(tmp_path / "mr.zarr"), clouds[1], min_samples=2)
    # errors: one line, exit status 2
    res = runner.invoke(main, ["run", str(tmp_path / "nope.zarr"), "--scheduler", procs.address])
    assert res.exit_code == 2 and "nope.zarr" in res.output and "Traceback" not in res.output
    import dask

    with dask.config.set({"distributed.comm.timeouts.connect": "2s"}):
        res = runner.invoke(main, ["run", paths[0], "--scheduler", "tcp://127.0.0.1:1",
                                   "--columns", "x,y,z"])
    assert res.exit_code == 2 and "cannot reach the Dask scheduler" in res.output


def test_cli_detached_job(procs, snaps, tmp_path):
    _, clouds, paths = snaps
    runner = CliRunner()
    out = tmp_path / "detached.zarr"
    res = runner.invoke(main, ["run", paths[1], "--out", str(out), "--scheduler", procs.address,
                               "--detach", "--name", "cli job"])
    assert res.exit_code == 0, res.output
    assert "submitted job cli job" in res.output
    # the printed command runs as printed (the name quoted: it holds a space)
    hint = next(ln for ln in res.output.splitlines() if ln.startswith("follow it: "))
    args = shlex.split(hint[len("follow it: "):])
    assert args[:2] == ["emst-dask", "job"] and args[-2:] == ["--", "cli job"]
    res = runner.invoke(main, args[1:-2] + ["--progress", "--forget"] + args[-2:])
    assert res.exit_code == 0, res.output
    assert "job cli job: finished" in res.output and f"wrote {out}" in res.output
    assert "edges=999" in res.output and "forgot job cli job" in res.output
    assert_same_tree(open_edges(out), clouds[1])
    res = runner.invoke(main, ["job", "cli job", "--scheduler-file", procs.scheduler_file])
    assert res.exit_code == 2 and "no job named 'cli job'" in res.output
    res = runner.invoke(main, ["run", paths[1], "--out", str(out), "--detach"])
    assert res.exit_code == 2 and "--detach needs --scheduler" in res.output
