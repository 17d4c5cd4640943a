"""What the command line says: options named as a shell user gives them,
absolute paths, rates with their unit, the demo's folder, ``warm``."""
from __future__ import annotations

import io
import os
import re

import numpy as np
import pytest
from click.testing import CliRunner

from emst_dask.cli import main


@pytest.fixture
def runner():
    return CliRunner()


@pytest.fixture
def edges(tmp_path, runner):
    np.save(tmp_path / "pts.npy", np.random.default_rng(5).random((1500, 3)))
    r = runner.invoke(main, ["run", str(tmp_path / "pts.npy"), "--out",
                             str(tmp_path / "edges.zarr"), "--in-process"])
    assert r.exit_code == 0, r.output
    return tmp_path / "edges.zarr"


def test_hdbscan_names_the_option_not_the_python_call(runner, edges, tmp_path):
    r = runner.invoke(main, ["hdbscan", str(edges), "--min-cluster-size", "50",
                             "--out", str(tmp_path / "labels.npy")])
    assert r.exit_code == 2, r.output
    assert "emst(" not in r.output and "min_samples=" not in r.output, r.output
    assert "--min-samples 50" in r.output and "emst-dask run" in r.output, r.output
    assert "--min-samples 1" in r.output, r.output
    assert not (tmp_path / "labels.npy").exists()


def test_plot_prints_an_absolute_path(runner, edges, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    r = runner.invoke(main, ["plot", "edges.zarr", "--points", "pts.npy", "--out", "mst.png"])
    assert r.exit_code == 0, r.output
    assert f"wrote {tmp_path / 'mst.png'}" in r.output, r.output


def test_rates_have_a_space_and_an_si_prefix():
    from emst_dask.progress import ProgressBar, si

    assert si(4.62e9) == "4.62 G" and si(512) == "512" and si(1.5e6) == "1.5 M"
    out = io.StringIO()
    bar = ProgressBar("emst", file=out, mininterval=0)
    bar("start", n=10_000_000, d=3, backend="cpu")
    bar("tree")
    bar("iteration", iteration=1, components=2_000_000)
    bar("iteration", iteration=2, components=1)
    bar("done", n_edges=9_999_999, total_weight=1.0, seconds=1.0)
    text = out.getvalue()
    assert re.search(r"\d [kMGT] edges/s", text), text
    assert not re.search(r"\d[kMGT]?edges", text), text


def test_demo_puts_its_files_in_the_working_directory(runner, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    r = runner.invoke(main, ["demo", "--n", "5000", "--backend", "cpu", "--no-progress"])
    assert r.exit_code == 0, r.output
    where = tmp_path / "emst-demo"
    assert f"demo files go to {where}" in r.output, r.output
    assert f"everything is in {where}" in r.output, r.output
    assert {"halos.zarr", "edges.zarr", "mst.png"} <= set(os.listdir(where))


def test_warm_compiles_and_refuses_bad_dimensions(runner):
    r = runner.invoke(main, ["warm", "--dims", "3", "--dtypes", "float64", "--no-products",
                             "--jobs", "1"])
    assert r.exit_code == 0, r.output
    assert "float64 3:" in r.output and "compiled in" in r.output
    from emst_dask.kernels.cpu.cache import compiled

    assert compiled(np.float64, 3)
    bad = runner.invoke(main, ["warm", "--dims", "9"])
    assert bad.exit_code == 2 and "dimensions 1 to 8" in bad.output
