"""The searches' work, counted on the emulated CUDA kernels (no GPU).

``k_search`` is instrumented by text on its way to the emulator's
compiler (``tests/cuda_emu.py``): per iteration, the points searched, the
traversal steps (loop turns: the chain of dependent loads), the node
records loaded, the leaves reached, the point records tested and the
stack pushes.  The emulator runs the threads one after another, so these
are counts, not times; they compare two tree layouts on the same cloud
(run it in each checkout).

    python benchmarks/search_work_emulated.py --dataset uniform --n 100000
"""
from __future__ import annotations

import argparse
import ctypes
import json
import os
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests"))

import cuda_emu  # noqa: E402

from emst_dask import datasets, engine  # noqa: E402
from emst_dask.kernels.cuda import kernel_set as cuda_set  # noqa: E402

NAMES = ("searched", "steps", "nodes", "leaves", "points", "pushes")
_PATCH = (  # (text in k_search, counter)
    ("  Pt<T, D> pi = P[i];\n", 0),
    ("  while (go) {\n", 1),
    ("      Node<T, D> nd = nodes[g];\n", 2),
    ("      Node<T, D> nd = nodes[g + 1];\n", 2),
    ("    if (g == cf) {\n", 3),
    ("    if (g + 1 == cl) {\n", 3),
    ("    Pt<T, D> pj_ = P[j_];", 4),
    ("        stack[sp++] = e;\n", 5),
)


def instrumented(src: str) -> str:
    """``src`` with counters in ``k_search`` (``emu_ctr``, one per NAMES)."""
    head, rest = src.split("k_search(const Pt", 1)
    body, tail = rest.split("k_ties(", 1)
    for text, c in _PATCH:
        if text not in body:
            raise RuntimeError(f"k_search has no {text.strip()!r}")
        nl = "\n" if text.endswith("\n") else ""
        body = body.replace(text, f"{text.rstrip()} emu_ctr[{c}]++;{nl}")
    return ('extern "C" { long long emu_ctr[8]; }\n' + head + "k_search(const Pt" + body
            + "k_ties(" + tail)


_LIBS = []


class CountingBackend(cuda_emu.EmuBackend):
    """The emulator with an instrumented ``k_search``."""

    def functions(self, dtype_str, d, part, periodic=False):
        real_source, real_build = cuda_set.source, cuda_emu.build

        def build(code, *a):
            lib = real_build(code, *a)
            _LIBS.append(lib)
            return lib

        cuda_set.source = lambda p=False: instrumented(real_source(p))
        cuda_emu.build = build
        try:
            return super().functions(dtype_str, d, part, periodic)
        finally:
            cuda_set.source, cuda_emu.build = real_source, real_build


def counters():
    """The counters summed over the instrumented libraries, then zeroed."""
    out = np.zeros(len(NAMES), np.int64)
    for lib in _LIBS:
        arr = (ctypes.c_longlong * 8).in_dll(lib, "emu_ctr")
        out += np.array(arr[:len(NAMES)])
        for k in range(8):
            arr[k] = 0
    return out


def run(name, n, dim, seed=0):
    K = cuda_set.make_kernel_set(CountingBackend(), "CountingKernels")
    gen = datasets.GENERATORS.get(name, datasets.TIES.get(name))
    x = np.ascontiguousarray(gen(n, dim=dim, seed=seed), dtype=np.float32)
    t = engine.Timers(enabled=False)
    bvh = engine.construct_bvh(K, x, t)
    s = K.init_boruvka(bvh, None, False)
    counters()
    rows, edges = [], 0
    while edges < bvh.n - 1:
        K.reduce_labels(bvh, s)
        K.compute_upper_bounds(bvh, s)
        K.find_component_outgoing_edges(bvh, s)
        rows.append(dict(zip(NAMES, counters().tolist())))
        K.reduce_component_minima(bvh, s)
        edges = K.merge_components(bvh, s)
    src, dst, w2 = K.finalize_edges(bvh, s)
    return {"dataset": name, "n": n, "d": dim, "iterations": rows,
            "total_w2": float(np.sort(np.asarray(w2, np.float64)).sum())}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dataset", default="uniform")
    ap.add_argument("--n", type=int, default=100_000)
    ap.add_argument("--dim", type=int, default=3)
    ap.add_argument("--out")
    a = ap.parse_args(argv)
    r = run(a.dataset, a.n, a.dim)
    tot = {k: sum(it[k] for it in r["iterations"]) for k in NAMES}
    print(json.dumps({**r, "all": tot}))
    if a.out:
        with open(a.out, "w") as f:
            json.dump({**r, "all": tot}, f, indent=1)


if __name__ == "__main__":
    main()
