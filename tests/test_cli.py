"""The ``emst-dask`` command: generate + run round trips and one-line errors."""
from __future__ import annotations

import re
import subprocess
import sys

import numpy as np
import pytest
from click.testing import CliRunner

from emst_dask import SpanningTree, datasets, open_edges
from emst_dask.cli import main
from emst_dask.kernels import cuda_available
from oracle import check_spanning_tree


@pytest.fixture
def runner():
    return CliRunner()


def _tree_from_file(edges: np.ndarray, n: int, d: int, dtype) -> SpanningTree:
    return SpanningTree(edges[:, 0].astype(np.int64), edges[:, 1].astype(np.int64),
                        edges[:, 2].astype(dtype), None, n, d)


def _field(output: str, name: str) -> str:
    m = re.search(rf"\b{name}=(\S+)", output)
    assert m, f"{name}= not in output:\n{output}"
    return m.group(1)


def _assert_one_line_error(result, *fragments):
    assert result.exit_code == 2, (result.exit_code, result.output)
    assert "Traceback" not in result.output
    assert result.exception is None or isinstance(result.exception, SystemExit)
    lines = [ln for ln in result.output.splitlines() if ln.startswith("Error:")]
    assert len(lines) == 1, result.output
    for frag in fragments:
        assert frag in lines[0], (frag, lines[0])


# ---------------------------------------------------------------------------
# generate
# ---------------------------------------------------------------------------
@pytest.mark.parametrize("name", ["uniform", "normal", "halos"])
def test_generate(runner, tmp_path, name):
    out = tmp_path / f"{name}.npy"
    res = runner.invoke(main, ["generate", name, "1000", "--out", str(out), "--dim", "2",
                               "--seed", "4"])
    assert res.exit_code == 0, res.output
    pts = np.load(out)
    assert pts.shape == (1000, 2) and pts.dtype == np.float32
    np.testing.assert_array_equal(pts, datasets.GENERATORS[name](1000, dim=2, seed=4))


def test_generate_counts_and_seeds(runner, tmp_path):
    a, b, c = (tmp_path / f"{x}.npy" for x in "abc")
    assert runner.invoke(main, ["generate", "uniform", "1e3", "-o", str(a)]).exit_code == 0
    assert runner.invoke(main, ["generate", "uniform", "1_000", "-o", str(b)]).exit_code == 0
    assert runner.invoke(main, ["generate", "uniform", "1000", "-o", str(c), "-s", "1"]).exit_code == 0
    pa, pb, pc = np.load(a), np.load(b), np.load(c)
    assert pa.shape == (1000, 3)
    np.testing.assert_array_equal(pa, pb)  # same seed (0), same cloud
    assert not np.array_equal(pa, pc)


@pytest.mark.parametrize("args,fragment", [
    (["generate", "spiral", "10"], "spiral"),
    (["generate", "uniform", "ten"], "ten"),
    (["generate", "uniform", "2.5"], "whole number"),
    (["generate", "uniform", "10", "--dim", "9"], "9"),
    (["generate", "uniform", "10"], "--out"),
])
def test_generate_bad_arguments(runner, tmp_path, args, fragment):
    if "--out" not in args and fragment != "--out":
        args = args + ["--out", str(tmp_path / "x.npy")]
    res = runner.invoke(main, args)
    _assert_one_line_error(res, fragment)


def test_generate_unwritable(runner, tmp_path):
    res = runner.invoke(main, ["generate", "uniform", "10", "--out",
                               str(tmp_path / "missing" / "x.npy")])
    _assert_one_line_error(res, "cannot write")


# ---------------------------------------------------------------------------
# run
# ---------------------------------------------------------------------------
@pytest.mark.parametrize("name,dim", [("halos", 3), ("uniform", 2)])
def test_generate_run_round_trip(runner, tmp_path, name, dim):
    cloud = tmp_path / "cloud.npy"
    edges = tmp_path / "edges.npy"
    res = runner.invoke(main, ["generate", name, "1500", "--out", str(cloud), "--dim", str(dim)])
    assert res.exit_code == 0, res.output
    res = runner.invoke(main, ["run", str(cloud), "--out", str(edges), "--backend", "cpu"])
    assert res.exit_code == 0, res.output
    pts = np.load(cloud)
    e = np.load(edges)
    assert e.shape == (1499, 3) and e.dtype == np.float64
    info = check_spanning_tree(_tree_from_file(e, 1500, dim, np.float32), pts)
    # what it prints
    assert _field(res.output, "n") == "1500"
    assert _field(res.output, "d") == str(dim)
    assert _field(res.output, "backend") == "cpu"
    assert float(_field(res.output, "seconds")) >= 0
    assert int(_field(res.output, "iterations")) >= 1
    assert float(_field(res.output, "total_weight")) == pytest.approx(info["total"], rel=1e-5)


def test_run_min_samples(runner, tmp_path):
    cloud = tmp_path / "cloud.npy"
    edges = tmp_path / "edges.zarr"
    pts = np.random.default_rng(0).random((800, 3))
    np.save(cloud, pts)
    res = runner.invoke(main, ["run", str(cloud), "-o", str(edges), "--min-samples", "5"])
    assert res.exit_code == 0, res.output
    assert _field(res.output, "min_samples") == "5"
    st = open_edges(str(edges))
    assert st.min_samples == 5
    tree = st.load()
    from oracle import oracle
    exp = oracle(pts, 5)
    assert tree.total_weight == pytest.approx(exp["total"], rel=1e-12)
    np.testing.assert_allclose(tree.weight, exp["w"][tree.source, tree.target], rtol=1e-12)
    # an edge .npy records no min_samples: refused before any work
    res = runner.invoke(main, ["run", str(cloud), "-o", str(tmp_path / "e.npy"), "-k", "5"])
    assert res.exit_code == 2 and "min_samples" in res.output
    assert not (tmp_path / "e.npy").exists()


def test_run_sorted_and_timings(runner, tmp_path):
    cloud = tmp_path / "cloud.npy"
    edges = tmp_path / "edges.npy"
    np.save(cloud, np.random.default_rng(1).random((500, 2)).astype(np.float32))
    res = runner.invoke(main, ["run", str(cloud), "-o", str(edges), "--sort", "--timings"])
    assert res.exit_code == 0, res.output
    assert "find_component_outgoing_edges" in res.output
    w = np.load(edges)[:, 2]
    assert np.all(np.diff(w) >= 0)


def test_run_without_out_writes_nothing(runner, tmp_path):
    cloud = tmp_path / "cloud.npy"
    np.save(cloud, np.random.default_rng(2).random((100, 3)))
    res = runner.invoke(main, ["run", str(cloud)])
    assert res.exit_code == 0, res.output
    assert sorted(p.name for p in tmp_path.iterdir()) == ["cloud.npy"]


@pytest.mark.parametrize("n", [0, 1])
def test_run_empty_and_single(runner, tmp_path, n):
    cloud = tmp_path / "cloud.npy"
    edges = tmp_path / "edges.npy"
    np.save(cloud, np.zeros((n, 3)))
    res = runner.invoke(main, ["run", str(cloud), "-o", str(edges)])
    assert res.exit_code == 0, res.output
    assert np.load(edges).shape == (0, 3)


def test_run_integer_file(runner, tmp_path):
    cloud = tmp_path / "cloud.npy"
    np.save(cloud, np.array([[0, 0], [3, 4], [3, 0]], np.int32))
    res = runner.invoke(main, ["run", str(cloud)])
    assert res.exit_code == 0, res.output
    assert float(_field(res.output, "total_weight")) == 7.0


# ---------------------------------------------------------------------------
# run: errors are one line, exit status 2, no traceback
# ---------------------------------------------------------------------------
def test_run_missing_file(runner, tmp_path):
    res = runner.invoke(main, ["run", str(tmp_path / "nope.npy")])
    _assert_one_line_error(res, "nope.npy", "no such file")


def test_run_not_npy(runner, tmp_path):
    bad = tmp_path / "bad.npy"
    bad.write_text("x,y,z\n1,2,3\n")
    res = runner.invoke(main, ["run", str(bad)])
    _assert_one_line_error(res, "bad.npy", "not a .npy file")


def test_run_npz(runner, tmp_path):
    bad = tmp_path / "bad.npz"
    np.savez(bad, points=np.zeros((3, 3)))
    res = runner.invoke(main, ["run", str(bad)])
    _assert_one_line_error(res, ".npz")


def test_run_object_array(runner, tmp_path):
    bad = tmp_path / "obj.npy"
    np.save(bad, np.array([[1, "a"]], dtype=object), allow_pickle=True)
    res = runner.invoke(main, ["run", str(bad)])
    _assert_one_line_error(res, "obj.npy")


def test_run_nan(runner, tmp_path):
    bad = tmp_path / "nan.npy"
    pts = np.random.default_rng(3).random((50, 3))
    pts[[7, 30], 1] = np.nan
    np.save(bad, pts)
    res = runner.invoke(main, ["run", str(bad)])
    _assert_one_line_error(res, "nan.npy", "2 row", "first bad row is 7")


@pytest.mark.parametrize("shape,fragment", [((10,), "2-D"), ((10, 9), "9 columns"),
                                            ((10, 0), "zero columns")])
def test_run_bad_shape(runner, tmp_path, shape, fragment):
    bad = tmp_path / "bad.npy"
    np.save(bad, np.zeros(shape))
    res = runner.invoke(main, ["run", str(bad)])
    _assert_one_line_error(res, fragment)


@pytest.mark.parametrize("k,fragment", [("0", "min_samples must be >= 1"),
                                        ("11", "larger than the number of points"),
                                        ("two", "two")])
def test_run_bad_min_samples(runner, tmp_path, k, fragment):
    cloud = tmp_path / "cloud.npy"
    np.save(cloud, np.zeros((10, 2)))
    res = runner.invoke(main, ["run", str(cloud), "--min-samples", k])
    _assert_one_line_error(res, fragment)


def test_run_bad_backend(runner, tmp_path):
    cloud = tmp_path / "cloud.npy"
    np.save(cloud, np.zeros((10, 2)))
    res = runner.invoke(main, ["run", str(cloud), "--backend", "tpu"])
    _assert_one_line_error(res, "tpu")


@pytest.mark.skipif(cuda_available(), reason="a GPU is visible here")
def test_run_cuda_without_gpu(runner, tmp_path):
    cloud = tmp_path / "cloud.npy"
    np.save(cloud, np.zeros((10, 2)))
    res = runner.invoke(main, ["run", str(cloud), "--backend", "cuda"])
    _assert_one_line_error(res, "GPU", "--backend cpu")


def test_run_unwritable_out(runner, tmp_path):
    cloud = tmp_path / "cloud.npy"
    np.save(cloud, np.random.default_rng(4).random((20, 2)))
    res = runner.invoke(main, ["run", str(cloud), "-o", str(tmp_path / "no" / "e.npy")])
    _assert_one_line_error(res, "cannot write")


# ---------------------------------------------------------------------------
# the command itself
# ---------------------------------------------------------------------------
def test_help_and_version(runner):
    res = runner.invoke(main, ["--help"])
    assert res.exit_code == 0
    assert "generate" in res.output and "run" in res.output
    res = runner.invoke(main, ["--version"])
    assert res.exit_code == 0 and "emst-dask" in res.output


def test_as_a_process(tmp_path):
    """The real entry point in a child process: exit statuses and stderr."""
    cloud = tmp_path / "c.npy"
    edges = tmp_path / "e.npy"
    cmd = [sys.executable, "-m", "emst_dask.cli"]
    r = subprocess.run(cmd + ["generate", "normal", "300", "--out", str(cloud)],
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr
    r = subprocess.run(cmd + ["run", str(cloud), "--out", str(edges)],
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr
    assert np.load(edges).shape == (299, 3)
    r = subprocess.run(cmd + ["run", str(tmp_path / "missing.npy")],
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 2
    assert r.stderr.strip().startswith("Error:") and "Traceback" not in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1


def test_generate_chunked_is_the_chunks_and_complete(runner, tmp_path):
    """--chunked: every chunk is its generator's rows from (seed, index)
    alone, whatever the processes; the snapshot opens as a source."""
    import zarr

    from emst_dask.datasets import halos_chunk, n_chunks

    out = tmp_path / "c.zarr"
    res = runner.invoke(main, ["generate", "halos", "250000", "-o", str(out), "--chunked",
                               "--chunk-rows", "100000", "--processes", "2", "-s", "3"])
    assert res.exit_code == 0, res.output
    g = zarr.open_group(str(out), mode="r")
    x = g["points"][:]
    assert x.shape == (250_000, 3) and x.dtype == np.float32
    assert g.attrs["generator"] == "halos-chunked" and g.attrs["chunk_rows"] == 100_000
    assert n_chunks(250_000, 100_000) == 3
    for i in range(3):
        np.testing.assert_array_equal(x[i * 100_000:(i + 1) * 100_000],
                                      halos_chunk(250_000, 3, 3, i, 100_000))
    assert (x >= 0).all() and (x < 1).all()  # the periodic unit box
    # one process gives the same cloud
    one = tmp_path / "one.zarr"
    assert runner.invoke(main, ["generate", "halos", "250000", "-o", str(one), "--chunked",
                                "--chunk-rows", "100000", "--processes", "1",
                                "-s", "3"]).exit_code == 0
    np.testing.assert_array_equal(zarr.open_group(str(one), mode="r")["points"][:], x)


def test_generate_chunked_refuses_what_it_cannot_write(runner, tmp_path):
    res = runner.invoke(main, ["generate", "normal", "1000", "-o", str(tmp_path / "a.zarr"),
                               "--chunked"])
    assert res.exit_code != 0 and "no chunked variant" in res.output
    res = runner.invoke(main, ["generate", "halos", "1000", "-o", str(tmp_path / "a.npy"),
                               "--chunked"])
    assert res.exit_code != 0 and "Zarr" in res.output
