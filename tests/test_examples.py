"""The examples and the service benchmark run as they are (CPU, small n)."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from service_util import repo_env

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _run(args, cwd, timeout=300):
    r = subprocess.run([sys.executable] + args, capture_output=True, text=True, cwd=cwd,
                       env=repo_env(), timeout=timeout)
    assert r.returncode == 0, f"{args} failed:\n{r.stdout}\n{r.stderr[-4000:]}"
    return r.stdout


@pytest.mark.parametrize("example,expect", [
    ("quickstart.py", "same tree as in memory: yes"),
    ("batch_snapshots.py", "with a missing snapshot: SpanningTree, InputError"),
    ("xyz_columns.py", "same tree as from the stacked array in memory: yes"),
])
def test_example(tmp_path, example, expect):
    out = _run([os.path.join(ROOT, "examples", example), str(tmp_path)], cwd=tmp_path)
    assert expect in out, out


def test_service_benchmark_smoke(tmp_path):
    out_json = tmp_path / "service.json"
    out = _run([os.path.join(ROOT, "benchmarks", "service_gpu.py"), "--n", "30000",
                "--chunk-rows", "7000", "--backend", "cpu", "--repeats", "1",
                "--persisted", "--out", str(out_json)], cwd=tmp_path)
    assert "ratio" in out
    res = json.loads(out_json.read_text())
    assert res["dataset"] == {"name": "halos", "n": 30000, "d": 3, "seed": 0,
                              "dtype": "float32", "zarr_format": 3, "chunk_rows": 7000}
    assert res["edges"]["n_edges"] == 29999 and res["check"]["max_rel_err"] < 1e-5
    assert res["floor_seconds_median"] > 0 and res["ratio"] > 0
    f = res["floors"][0]
    assert f["read"] > 0 and f["write"] > 0 and f["tree"] > 0
    assert f["floor"] == f["read"] + f["tree"] + f["write"]
    job = res["jobs"][0]
    assert set(job["worker_timings"]) >= {"queue", "read", "decode", "emst", "total_weight",
                                          "write", "copy_back", "encode_write", "commit"}
    # every second of the job in a phase, or in what the client and reply took
    assert sum(job["accounted"]["phases"].values()) == pytest.approx(job["seconds"])
    assert 0 <= job["accounted"]["phases"]["client_and_reply"] < job["seconds"]
    assert res["edges"]["index_dtype"] == "int32" and res["edges"]["format_version"] == 2
    assert res["persisted"]["same_total_as_snapshot_job"] is True
