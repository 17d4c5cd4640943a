"""A plain script, without ``if __name__ == "__main__":``, that runs jobs on
the embedded default cluster: the same results as a guarded one, its body
run once (worker processes started by spawn would re-run it)."""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import numpy as np

from service_util import repo_env

BODY = """\
import numpy as np
import dask.array as da
import emst_dask
from emst_dask.distributed.cluster import unguarded_main
print("BODY RUNS", flush=True)
pts = np.random.default_rng(7).random((3000, 3))
np.save("pts.npy", pts)
store = emst_dask.emst("pts.npy", out="edges.zarr")
labels = emst_dask.HDBSCAN(min_cluster_size=20).fit_predict(da.from_array(pts, chunks=1000))
np.save("labels.npy", labels)
print("TOTAL", repr(store.total_weight), store.n_edges)
print("UNGUARDED", unguarded_main())
"""


def _run(tmp_path, script, timeout=300):
    path = tmp_path / "script.py"
    path.write_text(script)
    return subprocess.run([sys.executable, str(path)], capture_output=True, text=True,
                          cwd=tmp_path, env=repo_env(), timeout=timeout)


def _reference():
    from emst_dask import HDBSCAN, emst

    pts = np.random.default_rng(7).random((3000, 3))
    tree = emst(pts)
    labels = HDBSCAN(min_cluster_size=20, backend="cpu").fit_predict(pts)
    return tree, labels


def _check(tmp_path, r, guarded):
    assert r.returncode == 0, r.stdout + r.stderr[-4000:]
    assert r.stdout.count("BODY RUNS") == 1, r.stdout
    tree, labels = _reference()
    total = [ln for ln in r.stdout.splitlines() if ln.startswith("TOTAL")][0].split()
    assert float(total[1]) == tree.total_weight and int(total[2]) == 2999
    from emst_dask import read_edges

    got = read_edges(str(tmp_path / "edges.zarr"))
    assert sorted(zip(got.source.tolist(), got.target.tolist())) == \
        sorted(zip(tree.source.tolist(), tree.target.tolist()))
    assert np.array_equal(np.load(tmp_path / "labels.npy"), labels)
    assert f"UNGUARDED {not guarded}" in r.stdout


def test_unguarded_script_runs_once_with_the_same_results(tmp_path):
    r = _run(tmp_path, BODY)
    _check(tmp_path, r, guarded=False)
    assert "Traceback" not in r.stderr, r.stderr[-4000:]


def test_guarded_script_same_results(tmp_path):
    guarded = "if __name__ == '__main__':\n" + textwrap.indent(BODY, "    ")
    _check(tmp_path, _run(tmp_path, guarded), guarded=True)


def test_unguarded_process_cluster_is_refused_in_one_line(tmp_path):
    # a GPU cluster needs its worker processes: what to add, before any start
    r = _run(tmp_path, textwrap.dedent("""\
        from emst_dask.distributed.cluster import EmbeddedCluster
        print("BODY RUNS", flush=True)
        emb = EmbeddedCluster(backend="cpu", processes=True)
        try:
            emb.start()
        except RuntimeError as exc:
            print("ERROR", exc)
        """))
    assert r.returncode == 0 and r.stdout.count("BODY RUNS") == 1, r.stdout + r.stderr
    err = [ln for ln in r.stdout.splitlines() if ln.startswith("ERROR")]
    assert len(err) == 1 and 'if __name__ == "__main__":' in err[0], r.stdout


def test_unguarded_main_reads_where_the_call_is(tmp_path):
    script = textwrap.dedent("""\
        from emst_dask.distributed.cluster import unguarded_main
        def where():
            return unguarded_main()
        print("top", where())
        if "__main__" == __name__:
            print("guarded", where())
        """)
    r = _run(tmp_path, script)
    assert r.returncode == 0, r.stderr
    assert "top True" in r.stdout and "guarded False" in r.stdout
    c = subprocess.run([sys.executable, "-c", "from emst_dask.distributed.cluster import "
                        "unguarded_main; print(unguarded_main())"], capture_output=True,
                       text=True, env=repo_env(), cwd=os.fspath(tmp_path))
    assert c.stdout.strip() == "False", c.stderr
