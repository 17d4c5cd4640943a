"""A first run says that it compiles the CPU kernels (and how to do it ahead
of time); a run on a warm cache says nothing of it."""
from __future__ import annotations

import io
import logging
import subprocess
import sys

import numpy as np
import pytest

from emst_dask import emst
from emst_dask.kernels.cpu import cache
from service_util import repo_env

NOTICE = "compiling the CPU kernels"


@pytest.fixture
def cold(monkeypatch):
    monkeypatch.setattr(cache, "compiled", lambda dtype, d: False)


def _pts():
    return np.random.default_rng(3).random((500, 3))


def test_cache_index_tells_warm_from_cold(tmp_path):
    emst(_pts(), backend="cpu")  # compiled now, if it was not
    assert cache.compiled(np.float64, 3)
    # an empty cache directory: numba would compile everything
    r = subprocess.run([sys.executable, "-c", "from emst_dask.kernels.cpu.cache import "
                        "compiled; print(compiled('float64', 3), compiled('float32', 2))"],
                       capture_output=True, text=True, timeout=120,
                       env={**repo_env(), "NUMBA_CACHE_DIR": str(tmp_path)})
    assert r.stdout.split() == ["False", "False"], r.stderr


def test_cold_cache_notice_in_memory(cold, caplog):
    with caplog.at_level(logging.WARNING, logger="emst_dask"):
        tree = emst(_pts(), backend="cpu")
    assert tree.n_edges == 499
    msgs = [r.getMessage() for r in caplog.records if NOTICE in r.getMessage()]
    assert len(msgs) == 1 and "float64 points in 3-D" in msgs[0]
    assert "emst-dask warm" in msgs[0] and "minutes" in msgs[0]


def test_warm_cache_says_nothing(caplog):
    emst(_pts(), backend="cpu")
    with caplog.at_level(logging.DEBUG, logger="emst_dask"):
        emst(_pts(), backend="cpu", progress=lambda phase, **info: None)
    assert not [r for r in caplog.records if NOTICE in r.getMessage()]


def test_cold_cache_notice_on_the_progress_bar(cold):
    from emst_dask.progress import ProgressBar

    out = io.StringIO()
    bar = ProgressBar("emst", file=out)
    emst(_pts(), backend="cpu", progress=bar)
    bar.close()
    assert out.getvalue().count(NOTICE) == 1, out.getvalue()


def test_cold_cache_notice_relayed_from_a_worker(cold, caplog, tmp_path):
    # a worker thread in this process, so that the patch reaches the worker
    from distributed import Client, LocalCluster

    np.save(tmp_path / "pts.npy", _pts())
    with LocalCluster(n_workers=1, threads_per_worker=1, processes=False,
                      dashboard_address=None) as lc, Client(lc) as cl:
        with caplog.at_level(logging.WARNING, logger="emst_dask"):
            tree = emst(str(tmp_path / "pts.npy"), client=cl)
    assert tree.n_edges == 499
    # once: the worker sends it to the client, which shows it
    assert len([r for r in caplog.records if NOTICE in r.getMessage()]) == 1


def _cli(args, cold_cache):
    code = ("import sys\nfrom emst_dask.kernels.cpu import cache\n"
            + ("cache.compiled = lambda dtype, d: False\n" if cold_cache else "")
            + "from emst_dask.cli import main\nsys.exit(main(sys.argv[1:]))")
    return subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True,
                          timeout=300, env=repo_env())


def test_cli_run_cold_and_warm(tmp_path):
    np.save(tmp_path / "pts.npy", _pts())
    args = ["run", str(tmp_path / "pts.npy"), "--in-process"]
    warm = _cli(args, cold_cache=False)
    assert warm.returncode == 0 and NOTICE not in warm.stdout + warm.stderr, warm.stderr
    r = _cli(args, cold_cache=True)
    assert r.returncode == 0, r.stderr
    assert r.stderr.count(NOTICE) == 1 and "emst-dask warm" in r.stderr, r.stderr
