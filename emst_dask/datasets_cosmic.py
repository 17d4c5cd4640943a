"""A clustered periodic N-body-like snapshot with a realistic halo population.

The model (``cosmic``), in the periodic unit box:

* a *field*: a cubic lattice of s^3 particles displaced by the Zel'dovich
  approximation, x = q + Psi(q), with Psi the gradient of a Gaussian
  potential made of ``MODES`` plane waves of integer wave vectors (so
  periodic) and power ~ k^-3 up to ``K_MAX``, scaled so that the linear
  density contrast -div Psi has the rms ``SIGMA``: shell crossing makes
  walls and filaments, and the densest caustics make small FoF groups;
* *halos*: the other n - s^3 particles, in NFW profiles (concentration
  ``CONCENTRATION``, truncated at r_200: 200 times the mean density) with
  masses from a power law N(>M) ~ M^-(ALPHA-1) down to ``MIN_HALO``
  particles, summing to the halo particles; each sits at a
  density peak of the field (the highest peaks get the largest halos) and
  moves with the field there;
* velocities: the field's 100 Psi (Zel'dovich's v ~ Psi), halos' members
  that plus an isotropic dispersion growing as M^(1/3); IDs 1 .. n.

Everything is a function of (n, seed): the plane waves and the halo
catalogue are drawn from ``seed`` alone, and the particles of row chunk c
(``CHUNK_ROWS`` rows) from (seed, c), so a chunk is generated without the
others (``chunk``) and a large snapshot is written chunk by chunk, on as
many processes as wanted.  With ``HALO_FRACTION`` = 0.45, about 40% of the
particles are in FoF groups of at least 20 at b = 0.2 (measured in
benchmarks/NOTES.md), with the largest groups beyond 1e5 particles from a
few million particles up.

The same bits on every machine (as ``emst_dask.datasets`` says): the waves'
sums, sines and cosines, the power laws, the NFW profile and the Rayleigh
and lognormal draws (numpy's, ``sqrt(2 E)`` and ``exp(0.1 Z)`` of its
exponential and normal draws) are computed by ``datasets_math`` and correctly
rounded arithmetic, not by numpy's vector functions, BLAS or the samplers
that call the C library's; until 2026-11-28 they were, and the snapshot could
differ in its last bits between machines (it is the same as then up to
those bits).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from . import datasets_math as dm

#: rows per generated chunk (the unit of (seed, chunk) determinism)
CHUNK_ROWS = 1 << 20
#: the fraction of the particles put in halos
HALO_FRACTION = 0.45
#: plane waves of the Zel'dovich potential, and their largest |m| (k = 2 pi m)
MODES = 96
K_MAX = 10
#: the rms linear density contrast of the field
SIGMA = 1.1
#: halo mass function slope (dN/dM ~ M^-ALPHA), smallest halo, concentration
ALPHA = 1.9
MIN_HALO = 8
CONCENTRATION = 6.0


@dataclass(frozen=True)
class Model:
    """What every chunk shares: the field's waves and the halo catalogue."""

    n: int
    side: int            # lattice side s: the first s^3 rows are the field
    m: np.ndarray        # (MODES, 3) integer wave vectors
    amp: np.ndarray      # (MODES,) potential amplitudes
    phase: np.ndarray    # (MODES,)
    counts: np.ndarray   # (H,) particles per halo, decreasing
    starts: np.ndarray   # (H,) first row of each halo
    centres: np.ndarray  # (H, 3) Eulerian centres
    bulk: np.ndarray     # (H, 3) bulk velocities


# The sums over the waves and the sines and cosines are written out in
# ``datasets_math`` (not BLAS's ``@``, numpy's sin and cos): the same bits
# on every machine.
def _displacement(q, model):
    """Psi(q) (m, 3) and the velocity 100 Psi, from the plane waves."""
    k = 2 * np.pi * model.m.astype(np.float64)
    out = np.zeros((len(q), 3))
    for a in range(0, len(q), 2048):  # blocks that stay in the cache
        arg = dm.dot3(q[a:a + 2048], k) + model.phase
        out[a:a + 2048] = dm.combine(dm.sin(arg) * model.amp, k)  # -grad of amp cos(k.q + phase)
    return out


def _contrast(q, model):
    """The linear density contrast -div Psi at q."""
    k = 2 * np.pi * model.m.astype(np.float64)
    k2 = k[:, 0] * k[:, 0] + k[:, 1] * k[:, 1] + k[:, 2] * k[:, 2]
    out = np.zeros(len(q))
    for a in range(0, len(q), 2048):
        cos = dm.cos(dm.dot3(q[a:a + 2048], k) + model.phase)
        out[a:a + 2048] = -dm.combine(cos, (model.amp * k2)[:, None])[:, 0]
    return out


def _halo_counts(n_halo, rng):
    """Halo sizes: a rank-ordered power law N(>M) ~ M^-(ALPHA-1) down to
    MIN_HALO, its top chosen so that the sizes sum to n_halo (exactly, after
    rounding: the remainder goes to the largest)."""
    rank = dm.power(np.arange(1, 2_000_000, dtype=np.float64), -1.0 / (ALPHA - 1.0))
    # sum of the first j ranks, added one after another (a fixed order)
    running = np.cumsum(rank)

    def total(top):
        j = int(np.count_nonzero(top * rank >= MIN_HALO))  # rank decreases
        return top * running[j - 1] if j else 0.0

    lo, hi = float(MIN_HALO), float(n_halo)
    for _ in range(60):  # bisection: total(top) increases with top
        mid = 0.5 * (lo + hi)
        lo, hi = (mid, hi) if total(mid) < n_halo else (lo, mid)
    sizes = lo * rank
    big = sizes >= MIN_HALO
    # rng.lognormal's draws, exponentiated by datasets_math
    sizes = sizes[big] * dm.exp(0.1 * rng.standard_normal(int(big.sum())))
    counts = np.sort(np.maximum(np.floor(sizes).astype(np.int64), 1))[::-1]
    while counts.sum() > n_halo and len(counts) > 1:
        counts = counts[:-1]
    counts[0] += n_halo - int(counts.sum())
    return counts


@lru_cache(maxsize=4)
def model(n: int, seed: int = 0) -> Model:
    """The shared part of the snapshot of n particles (see the module docstring)."""
    rng = np.random.default_rng([seed, 0x5EED])
    field = (1 - HALO_FRACTION) * n  # side: the largest s with s^3 <= field
    side = int(field ** (1 / 3))
    while (side + 1) ** 3 <= field:  # exact: Python compares int and float exactly
        side += 1
    while side ** 3 > field:
        side -= 1
    ms = rng.integers(-K_MAX, K_MAX + 1, size=(4 * MODES, 3))
    ms = ms[(ms ** 2).sum(1) > 0][:MODES]
    kk = np.sqrt((ms * ms).sum(1).astype(np.float64)) * 2 * np.pi
    # potential phi ~ k^-2 delta, delta with power ~ k^-3 per mode (more
    # power on large scales): |phi_k| ~ k^-3.5, random sign through the phase;
    # Rayleigh amplitudes: rng.rayleigh's, sqrt(2 E), E exponential
    rayleigh = np.sqrt(2.0 * rng.standard_exponential(len(ms)))
    amp = rayleigh / (kk * kk * kk * np.sqrt(kk))
    phase = rng.random(len(ms)) * 2 * np.pi
    m0 = Model(n, side, ms, amp, phase, np.zeros(0, np.int64), np.zeros(0, np.int64),
               np.zeros((0, 3)), np.zeros((0, 3)))
    grid = rng.random((20_000, 3))
    delta = _contrast(grid, m0)
    mean = math.fsum(delta) / len(delta)
    sigma = math.sqrt(math.fsum((delta - mean) * (delta - mean)) / len(delta))
    amp = amp * (SIGMA / sigma)
    m0 = Model(n, side, ms, amp, phase, m0.counts, m0.starts, m0.centres, m0.bulk)
    n_halo = n - side ** 3
    counts = _halo_counts(n_halo, rng) if n_halo > 0 else np.zeros(0, np.int64)
    # the halos at the highest peaks of the field among random candidates
    cand = rng.random((max(8 * len(counts), 1000), 3))
    order = np.argsort(-_contrast(cand, m0), kind="stable")[:len(counts)]
    q = cand[order]
    disp = _displacement(q, m0)
    centres = np.mod(q + disp, 1.0)
    starts = side ** 3 + np.concatenate([[0], np.cumsum(counts)[:-1]]).astype(np.int64)
    return Model(n, side, ms, amp, phase, counts, starts, centres, 100.0 * disp)


def _nfw_radii(u, c=CONCENTRATION):
    """r / r_200 for uniform u in [0, 1): the inverse of the NFW mass profile."""
    x = np.arange(4097) * (c / 4096)
    mass = dm.log(1.0 + x) - x / (1.0 + x)
    # linear interpolation in the table (np.interp's, written out)
    t = u * mass[-1]
    i = np.clip(np.searchsorted(mass, t, side="right") - 1, 0, len(x) - 2)
    frac = (t - mass[i]) / (mass[i + 1] - mass[i])
    return (x[i] + frac * (x[i + 1] - x[i])) / c


def chunk(n: int, c: int, seed: int = 0):
    """Rows [c CHUNK_ROWS, min(n, (c+1) CHUNK_ROWS)) of the snapshot.

    Returns
    -------
    pos : (m, 3) float32 in [0, 1)
    vel : (m, 3) float32
    ids : (m,) uint64, 1-based row numbers
    """
    md = model(int(n), int(seed))
    a, b = c * CHUNK_ROWS, min(n, (c + 1) * CHUNK_ROWS)
    if a >= b:
        return np.zeros((0, 3), np.float32), np.zeros((0, 3), np.float32), np.zeros(0, np.uint64)
    rng = np.random.default_rng([seed, 0xC4, c])
    pos = np.empty((b - a, 3))
    vel = np.empty((b - a, 3))
    s = md.side
    f1 = min(b, s ** 3)
    if a < f1:  # the field: lattice rows a .. f1
        i = np.arange(a, f1)
        q = (np.stack([i // (s * s), (i // s) % s, i % s], 1) + 0.5) / s
        disp = _displacement(q, md)
        pos[:f1 - a] = q + disp
        vel[:f1 - a] = 100.0 * disp
    h0 = max(a, s ** 3)
    if h0 < b:  # halo members: rows h0 .. b
        rows = np.arange(h0, b)
        h = np.searchsorted(md.starts, rows, side="right") - 1
        cnt = md.counts[h].astype(np.float64)
        r200 = dm.cbrt(3 * cnt / (800 * np.pi * n))
        r = _nfw_radii(rng.random(len(rows))) * r200
        d = rng.standard_normal((len(rows), 3))
        d /= np.sqrt(d[:, 0] * d[:, 0] + d[:, 1] * d[:, 1] + d[:, 2] * d[:, 2])[:, None]
        pos[h0 - a:] = md.centres[h] + d * r[:, None]
        sig = 30.0 * dm.cbrt(cnt / 1000.0)
        vel[h0 - a:] = md.bulk[h] + rng.standard_normal((len(rows), 3)) * sig[:, None]
    pos = np.mod(pos, 1.0).astype(np.float32)
    pos[pos >= 1.0] = 0.0  # float32 rounding of values just below 1
    return pos, vel.astype(np.float32), np.arange(a + 1, b + 1, dtype=np.uint64)


def n_chunks(n: int) -> int:
    """Chunks of ``CHUNK_ROWS`` rows covering n."""
    return max(1, -(-int(n) // CHUNK_ROWS))


def snapshot(n: int, seed: int = 0):
    """All rows: (pos (n, 3) float32, vel (n, 3) float32, ids (n,) uint64)."""
    parts = [chunk(n, c, seed) for c in range(n_chunks(n))]
    return tuple(np.concatenate([p[i] for p in parts]) for i in range(3))


def cosmic(n: int, dim: int = 3, seed: int = 0) -> np.ndarray:
    """The positions of ``snapshot(n, seed)``: (n, 3) float32 in [0, 1)."""
    if dim != 3:
        raise ValueError("the cosmic snapshot is 3-D")
    return snapshot(n, seed)[0]
