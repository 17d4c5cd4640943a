"""``emst-dask`` with Zarr: generate snapshots, run (in this process and on
the embedded default cluster), info, plot, demo."""
from __future__ import annotations

import os
import re

import numpy as np
import pytest
import zarr
from click.testing import CliRunner

import emst_dask
from emst_dask import datasets
from emst_dask.cli import main
from emst_dask.io.edge_store import open_edges
from service_util import assert_same_tree, cloud, write_snapshot


@pytest.fixture
def runner():
    return CliRunner()


def _error_line(res):
    assert res.exit_code == 2, (res.exit_code, res.output)
    assert "Traceback" not in res.output
    lines = [ln for ln in res.output.splitlines() if ln.startswith("Error:")]
    assert len(lines) == 1, res.output
    return lines[0]


@pytest.mark.parametrize("fmt,columns", [("3", None), ("2", "x,y,z")])
def test_generate_zarr_and_run_in_process(runner, tmp_path, fmt, columns):
    snap = tmp_path / "snap.zarr"
    args = ["generate", "halos", "3000", "--out", str(snap), "--chunk-rows", "700",
            "--zarr-format", fmt, "--seed", "3"]
    if columns:
        args += ["--columns", columns]
    res = runner.invoke(main, args)
    assert res.exit_code == 0, res.output
    g = zarr.open_group(snap, mode="r")
    assert g.metadata.zarr_format == int(fmt)
    want = datasets.halos(3000, dim=3, seed=3)
    got = np.stack([g[c][:] for c in "xyz"], 1) if columns else g["points"][:]
    np.testing.assert_array_equal(got, want)
    assert (g["x"] if columns else g["points"]).chunks[0] == 700
    out = tmp_path / "edges.zarr"
    res = runner.invoke(main, ["run", str(snap), "--out", str(out), "--in-process",
                               "--timings"])
    assert res.exit_code == 0, res.output
    assert "n=3000 d=3" in res.output and "edges=2999" in res.output
    assert "read" in res.output and "write" in res.output
    assert_same_tree(open_edges(out), want)
    # an existing store is kept unless --overwrite
    line = _error_line(runner.invoke(main, ["run", str(snap), "--out", str(out), "--in-process"]))
    assert "already exists" in line and "--overwrite" in line
    res = runner.invoke(main, ["run", str(snap), "--out", str(out), "--in-process",
                               "--overwrite", "-k", "3"])
    assert res.exit_code == 0, res.output
    assert open_edges(out).min_samples == 3


def test_run_npy_to_zarr_and_info(runner, tmp_path):
    pts = cloud(1500, 2, seed=4)
    np.save(tmp_path / "c.npy", pts)
    res = runner.invoke(main, ["run", str(tmp_path / "c.npy"), "-o", str(tmp_path / "e.zarr"),
                               "--in-process", "--sort"])
    assert res.exit_code == 0, res.output
    tree = assert_same_tree(open_edges(tmp_path / "e.zarr"), pts)
    assert np.all(np.diff(tree.weight) >= 0)
    res = runner.invoke(main, ["info", str(tmp_path / "e.zarr")])
    assert res.exit_code == 0, res.output
    ref = emst_dask.emst(pts)
    assert "n=1500 d=2 edges=1499 min_samples=1 dtype=float32" in res.output
    assert f"total_weight={ref.total_weight!r}" in res.output
    m = re.search(r"weight min=(\S+) median=(\S+) max=(\S+)", res.output)
    w = ref.weight.astype(np.float64)
    assert float(m.group(1)) == w.min() and float(m.group(3)) == w.max()
    assert float(m.group(2)) == pytest.approx(np.median(w))
    assert f"input={tmp_path / 'c.npy'}" in res.output
    assert f"version={emst_dask.__version__}" in res.output
    # info on a plain .npy edge array, and on things that are not edge stores
    np.save(tmp_path / "e.npy", ref.to_numpy())
    res = runner.invoke(main, ["info", str(tmp_path / "e.npy")])
    assert res.exit_code == 0 and "edges=1499" in res.output
    assert "no such edge store" in _error_line(runner.invoke(main, ["info", str(tmp_path / "x")]))
    zarr.open_group(tmp_path / "half.zarr", mode="w").attrs.update(
        {"format": "emst-dask edges 1", "complete": False})
    assert "incomplete edge store" in _error_line(
        runner.invoke(main, ["info", str(tmp_path / "half.zarr")]))


def test_run_errors_name_the_place(runner, tmp_path):
    pts = cloud(500, 3, seed=6)
    pts[123, 0] = np.nan
    snap = write_snapshot(tmp_path / "bad.zarr", pts, chunk_rows=100)
    line = _error_line(runner.invoke(main, ["run", snap, "-o", str(tmp_path / "e.zarr"),
                                            "--in-process"]))
    assert "bad.zarr/points: chunk 1 (rows 100-199)" in line and "first bad row is 123" in line
    assert not (tmp_path / "e.zarr").exists()
    line = _error_line(runner.invoke(main, ["run", str(tmp_path / "none.zarr"), "--in-process"]))
    assert "none.zarr: no such file or Zarr store" in line
    g = zarr.open_group(tmp_path / "cols.zarr", mode="w")
    g.create_array("x", shape=(5,), dtype="f4")
    line = _error_line(runner.invoke(main, ["run", str(tmp_path / "cols.zarr"), "--in-process",
                                            "--columns", "x,y"]))
    assert "has no array 'y'" in line
    line = _error_line(runner.invoke(main, ["run", snap, "--scheduler", "a", "--scheduler-file",
                                            "b"]))
    assert "not both" in line


def test_plot(runner, tmp_path):
    pts = datasets.halos(20_000, dim=3, seed=1)
    snap = write_snapshot(tmp_path / "s.zarr", pts, chunk_rows=5000)
    emst_dask.emst(snap, client=False, out=tmp_path / "e.zarr")
    png = tmp_path / "mst.png"
    res = runner.invoke(main, ["plot", str(tmp_path / "e.zarr"), "--points", snap, "--out",
                               str(png), "--max-points", "2000"])
    assert res.exit_code == 0, res.output
    m = re.search(r"(\d+) edges of (\d+) points in the slab", res.output)
    assert m and 0 < int(m.group(1)) < int(m.group(2)) <= 2200
    with open(png, "rb") as fh:
        assert fh.read(8) == b"\x89PNG\r\n\x1a\n"
    from matplotlib.image import imread

    img = imread(png)
    assert img.shape[0] > 500 and img.shape[1] > 1000
    assert img[..., :3].std() > 0.05  # something is drawn
    # 2-D points and mutual reachability draw too; a wrong cloud is refused
    p2 = cloud(3000, 2, seed=2)
    np.save(tmp_path / "p2.npy", p2)
    emst_dask.emst(p2, out=tmp_path / "e2.zarr", min_samples=4)
    res = runner.invoke(main, ["plot", str(tmp_path / "e2.zarr"), "-p", str(tmp_path / "p2.npy"),
                               "-o", str(tmp_path / "p2.png")])
    assert res.exit_code == 0, res.output
    line = _error_line(runner.invoke(main, ["plot", str(tmp_path / "e.zarr"), "-p",
                                            str(tmp_path / "p2.npy"), "-o",
                                            str(tmp_path / "x.png")]))
    assert "has 3000 points but the edge store" in line


def test_demo_on_the_embedded_cluster(runner, tmp_path):
    res = runner.invoke(main, ["demo", "--dir", str(tmp_path / "demo"), "--n", "20000",
                               "--backend", "cpu", "--no-progress"])
    assert res.exit_code == 0, res.output
    d = tmp_path / "demo"
    assert "cluster: LocalCluster with 1 worker(s)" in res.output
    for name in ("halos.zarr", "edges.zarr", "mst.png"):
        assert str(d / name) in res.output and os.path.exists(d / name)
    assert_same_tree(open_edges(d / "edges.zarr"), datasets.halos(20_000, dim=3, seed=0))
    # run again in the same directory: it replaces its own snapshot, store and picture
    res = runner.invoke(main, ["demo", "--dir", str(d), "--n", "20000", "--backend", "cpu",
                               "--no-progress"])
    assert res.exit_code == 0, res.output
