"""The reference clouds are the same bits everywhere: pinned fingerprints of
every generator, the halo catalogue at the sizes where numpy's multinomial
changed between versions, and the same fingerprints again in a process
whose numpy is barred from its SIMD code (the code another CPU would run).
"""
from __future__ import annotations

import hashlib
import json
import math
import os
import subprocess
import sys

import numpy as np
import pytest

from emst_dask import datasets, datasets_cosmic
from emst_dask import datasets_math as dm


def _fingerprint(*arrays) -> str:
    h = hashlib.sha256()
    for a in arrays:
        a = np.ascontiguousarray(a)
        h.update(f"{a.dtype.str}{a.shape}".encode())
        h.update(a.tobytes())
    return h.hexdigest()[:16]


def fingerprints() -> dict:
    """name -> fingerprint of every generator's output (small n) and of the
    halo catalogue at the sizes where numpy 2.4 and 2.5 drew different ones."""
    out = {}
    for name, make in {**datasets.GENERATORS, **datasets.TIES}.items():
        out[name] = _fingerprint(make(20_000, 3, 0))
    out["halos-2d-seed7"] = _fingerprint(datasets.halos(20_000, 2, 7))
    out["lattice-1d"] = _fingerprint(datasets.lattice(999, 1, 0))
    for name, make in datasets.CHUNK_GENERATORS.items():
        out[f"{name}_chunk"] = _fingerprint(make(100_000, 3, 0, 0, 65536),
                                            make(100_000, 3, 0, 1, 65536))
    # a chunk of a billion-point cloud: 1.75M halos in the shared catalogue
    out["halos_chunk-1e9"] = _fingerprint(datasets.halos_chunk(10 ** 9, 3, 0, 5, 1 << 14))
    out["cosmic-snapshot"] = _fingerprint(*datasets_cosmic.snapshot(20_000, 3))
    for n in (10_000_000, 50_000_000):
        stages = datasets.halo_catalogue(n, 3, np.random.default_rng(0))
        out[f"halo_catalogue-{n}"] = [_fingerprint(s) for s in stages]
    return out


#: measured with numpy 2.4.6 and 2.5.2 (AVX-512 machine, and the same with
#: numpy's SIMD code turned off): any change here changes the clouds, so
#: every figure measured on them (say so in benchmarks/NOTES.md)
PINNED = {
    "uniform": "ebdae492156be850",
    "normal": "d234d89d7e247c8d",
    "halos": "e14584154c9a342e",
    "cosmic": "75ffd16dc6597a8c",
    "lattice": "c728aaee8bd6e2b9",
    "tracks": "a650486ff61bc149",
    "copies4": "315247404b5fca2d",
    "copies16": "b190a04b5e15b575",
    "halos-2d-seed7": "eaee2a3b161616bd",
    "lattice-1d": "96062728ed48bb5e",
    "uniform_chunk": "b525a21fd086df55",
    "halos_chunk": "047574be50176b3d",
    "halos_chunk-1e9": "8db60e8b1ccdc389",
    "cosmic-snapshot": "94c5c13bbc37be0b",
    "halo_catalogue-10000000": ["d2c3e4b88baa6252", "13030064e6ec7ab4", "97a508e7676c8c46"],
    "halo_catalogue-50000000": ["dba98a1deffef458", "eea8d272e4d24d45", "d697b4b7a1c856cb"],
}


@pytest.fixture(scope="module")
def here():
    return fingerprints()


def test_pinned(here):
    assert here == PINNED


def test_the_same_without_simd(here):
    """A process with numpy's dispatched SIMD code off (what a CPU without
    AVX-512 or AVX2 runs, for ``power``, ``exp``, ``log``...) and another
    BLAS kernel makes the same clouds."""
    from numpy._core._multiarray_umath import __cpu_baseline__, __cpu_dispatch__

    from numpy._core._multiarray_umath import __cpu_features__

    extra = [f for f in __cpu_dispatch__ if f not in __cpu_baseline__ and __cpu_features__.get(f)]
    if not extra:
        pytest.skip("numpy has no dispatched SIMD code on this machine")
    env = dict(os.environ, NPY_DISABLE_CPU_FEATURES=" ".join(extra),
               OPENBLAS_CORETYPE="Prescott")
    code = ("import json, sys; sys.path.insert(0, sys.argv[1]); "
            "import test_datasets_stable as t; print(json.dumps(t.fingerprints()))")
    run = subprocess.run([sys.executable, "-c", code, os.path.dirname(__file__)],
                         env=env, capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stderr
    assert json.loads(run.stdout.strip().splitlines()[-1]) == here


# ---------------------------------------------------------------------------
# what the fingerprints stand on
# ---------------------------------------------------------------------------
def test_apportion():
    rng = np.random.default_rng(1)
    w = rng.random(1000) ** 3
    quota = 12345 * w / w.sum()
    mean = np.zeros(1000)
    for offset in np.arange(200) / 200:
        counts = datasets.apportion(np.cumsum(w), 12345, offset)
        assert counts.dtype == np.int64 and counts.sum() == 12345
        assert (counts >= np.floor(quota) - 1e-9).all() and (counts <= np.ceil(quota) + 1e-9).all()
        mean += counts / 200
    np.testing.assert_allclose(mean, quota, atol=0.006)  # the quota on average
    assert datasets.apportion(np.array([0.0, 0.0, 1.0]), 7, 0.99).tolist() == [0, 0, 7]


def test_halo_catalogue_statistics():
    counts, centres, radii = datasets.halo_catalogue(10_000_000, 3, np.random.default_rng(0))
    assert counts.sum() == 7_000_000 and len(counts) == 17_500
    assert centres.shape == (17_500, 3) and ((0 <= centres) & (centres < 1)).all()
    np.testing.assert_allclose(radii, 0.004 * np.cbrt(counts / 400 + 1), rtol=1e-14)
    # the weights' power law, P(w > x) = x^-0.9, survives in the counts
    w = counts / counts.min()
    for x in (10, 100):
        assert abs((w > x).mean() / x ** -0.9 - 1) < 0.2


def test_halos_in_the_unit_box():
    x = datasets.halos(200_000, 3, 0)
    assert x.dtype == np.float32 and ((0 <= x) & (x < 1)).all()
    y = datasets.halos_chunk(200_000, 3, 0, 1, 65536)
    assert y.shape == (65536, 3) and ((0 <= y) & (y < 1)).all()


def test_lattice_side():
    for dim in (1, 2, 3, 4):
        for n in range(1, 3000):
            assert datasets._round_root(n, dim) == round((n / 2) ** (1 / dim)), (n, dim)
    assert datasets._round_root(2 * 1000 ** 3, 3) == 1000
    assert datasets._round_root(2 * 1000 ** 3 - 1, 3) == 1000


def test_math_accuracy():
    rng = np.random.default_rng(2)
    x = np.concatenate([rng.random(50_000) * 1e3 + 1e-300, rng.random(50_000),
                        2.0 ** rng.integers(-1000, 1000, 1000)])
    ulps = lambda a, b: np.max(np.abs(a - b) / np.spacing(np.abs(b)))  # noqa: E731
    assert ulps(dm.log(x), np.log(x)) <= 4
    y = rng.random(50_000) * 1400 - 700
    assert ulps(dm.exp(y), np.exp(y)) <= 2
    # numpy's own float64 cbrt is off by up to 3 ulps on some CPUs (its
    # vectorised loop): the reference is the extended-precision one, rounded
    extended = np.finfo(np.longdouble).nmant > 52
    exact = np.cbrt(x.astype(np.longdouble)).astype(np.float64) if extended else np.cbrt(x)
    assert ulps(dm.cbrt(x), exact) <= (2 if extended else 4)
    u = x[:100_000]  # results within range
    assert ulps(dm.power(u, -1 / 0.9), u ** (-1 / 0.9)) <= 16
    t = rng.random(50_000) * 400 - 200
    assert np.abs(dm.sin(t) - np.sin(t)).max() < 4e-16
    assert np.abs(dm.cos(t) - np.cos(t)).max() < 4e-16
    a, b = rng.random((50, 3)), rng.random((7, 3))
    np.testing.assert_allclose(dm.dot3(a, b), a @ b.T, rtol=1e-15)
    w, v = rng.random((50, 96)), rng.random((96, 3))
    np.testing.assert_allclose(dm.combine(w, v), w @ v, rtol=1e-14)
    assert math.isclose(float(dm.sin(np.array([math.pi / 6]))[0]), 0.5, rel_tol=1e-15)
