"""Temporaries a dead job left: removed by a later job writing the same
output, or by ``emst-dask clean DIR``, only when they are provably the
package's own (the temporary's name and the package's mark inside) and
untouched for long enough; a user's file beside them, a user's directory
named like one, a temporary still being written and a former output set
aside while being replaced are kept."""
from __future__ import annotations

import logging
import os
import time

import numpy as np
import pytest
from click.testing import CliRunner

import emst_dask
from emst_dask.cli import main
from service_util import assert_same_tree, cloud

DAY = 24 * 3600


@pytest.fixture(scope="module")
def pts():
    return cloud(300, 3, seed=81)


def _age(path, seconds):
    """Make ``path`` and everything in it look untouched for ``seconds``."""
    t = time.time() - seconds
    for root, dirs, files in os.walk(path):
        for name in dirs + files:
            os.utime(os.path.join(root, name), (t, t))
    os.utime(path, (t, t))


def _dead_shared_store(out, n=300):
    """A partitioned job's shared edge store, begun and partly written as a
    job leaves it when its scheduler is killed during the write."""
    from emst_dask.io.output import Output
    from emst_dask.io.shared_store import create_shared_store, write_shared_rows

    o = Output(os.fspath(out), chunk_rows=64)
    store = create_shared_store(o, n - 1, np.float64)
    m = 200
    write_shared_rows(store, 0, np.arange(m, dtype=np.int64), np.arange(m, dtype=np.int64) + 1,
                      np.ones(m))
    assert os.path.isdir(store.where) and ".emst-tmp-" in store.where
    assert store.where.endswith("-shared")
    return store.where


def _layout(tmp_path):
    """A folder with a dead job's stale temporary, a young one, a user's
    file, a user's hidden directory named like a temporary (no mark) and a
    set-aside former output."""
    from emst_dask.io.output import Output

    d = tmp_path / "results"
    d.mkdir()
    stale = _dead_shared_store(d / "edges.zarr")
    _age(stale, 2 * DAY)
    young = _dead_shared_store(d / "other.zarr")
    user_file = d / "my_notes.txt"
    user_file.write_text("mine\n")
    imitation = d / ".edges.zarr.emst-tmp-0123abcd-attempt"
    imitation.mkdir()
    (imitation / "data.csv").write_text("a,b\n")
    _age(imitation, 2 * DAY)
    aside = Output(os.fspath(d / "gone.zarr")).temporary("old-12345678")
    os.makedirs(aside)
    (d / "gone.zarr.txt").write_text("x")
    _age(aside, 2 * DAY)
    return d, stale, young, user_file, imitation, aside


def test_cli_clean_removes_only_a_dead_jobs_stale_temporaries(tmp_path):
    d, stale, young, user_file, imitation, aside = _layout(tmp_path)
    runner = CliRunner()
    res = runner.invoke(main, ["clean", os.fspath(d), "--dry-run"])
    assert res.exit_code == 0, res.output
    assert f"would remove {stale}" in res.output and os.path.isdir(stale)
    res = runner.invoke(main, ["clean", os.fspath(d)])
    assert res.exit_code == 0, res.output
    assert f"removed {stale}" in res.output, res.output
    assert not os.path.exists(stale)
    for kept in (young, imitation, aside):
        assert os.path.isdir(kept), kept
        assert f"kept {kept}" in res.output, res.output
    assert user_file.read_text() == "mine\n"
    assert "mv '" in res.output  # how to put the set-aside output back


def test_later_job_removes_a_dead_jobs_stale_temporary(tmp_path, pts, caplog):
    d, stale, young, user_file, imitation, aside = _layout(tmp_path)
    out = os.fspath(d / "edges.zarr")
    with caplog.at_level(logging.WARNING, logger="emst_dask.io.output"):
        st = emst_dask.emst(pts, out=out)
    assert_same_tree(st, pts)
    assert not os.path.exists(stale), "the dead job's temporary is still there"
    assert stale in caplog.text
    assert os.path.isdir(imitation) and os.path.isdir(young) and os.path.isdir(aside)
    assert user_file.read_text() == "mine\n"


def test_a_temporary_holding_a_users_file_is_kept(tmp_path):
    d = tmp_path / "results"
    d.mkdir()
    stale = _dead_shared_store(d / "edges.zarr")
    with open(os.path.join(stale, "precious.txt"), "w") as fh:
        fh.write("mine")
    _age(stale, 2 * DAY)
    res = CliRunner().invoke(main, ["clean", os.fspath(d)])
    assert res.exit_code == 0, res.output
    assert os.path.isfile(os.path.join(stale, "precious.txt")), res.output
    assert "0 removed" in res.output
