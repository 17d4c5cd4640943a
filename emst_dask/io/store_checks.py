"""What an edge store must be before a product uses its tree.

``open_edges`` checks what the metadata says (``check_layout``: the arrays
are arrays of the right kinds and lengths, the attributes agree with
them); ``EdgeStore.load`` checks what the arrays hold (``check_tree``:
row ids in range, finite weights >= 0, core distances where the tree
needs them, and n - 1 edges without a cycle, so a spanning tree).  A store
edited or damaged past its checksums is refused, naming the store, instead
of giving wrong groups, heights or clusters.
"""
from __future__ import annotations

import numpy as np
from numba import njit

from ..errors import InputError

#: the weight dtypes a store may record
WEIGHT_DTYPES = ("float32", "float64")


def check_layout(where: str, group, attrs: dict):
    """Refuse a Zarr edge store whose arrays or attributes cannot hold a
    tree (``group``: the open zarr group; ``attrs``: its attributes)."""
    import zarr

    arrays = {}
    for name in ("source", "target", "weight", "core_distances"):
        if name not in group:
            continue
        a = group[name]
        if not isinstance(a, zarr.Array) or a.ndim != 1:
            raise InputError(f"{where}: {name} is not a 1-D array")
        arrays[name] = a
    for name in ("source", "target"):
        if arrays[name].dtype.kind not in "iu":
            raise InputError(f"{where}: {name} holds {arrays[name].dtype}, not integer row ids")
    if arrays["weight"].dtype.kind != "f":
        raise InputError(f"{where}: weight holds {arrays['weight'].dtype}, not floats")
    m = arrays["source"].shape[0]
    if arrays["target"].shape[0] != m or arrays["weight"].shape[0] != m:
        raise InputError(f"{where}: source, target and weight have different lengths "
                         f"({m}, {arrays['target'].shape[0]}, {arrays['weight'].shape[0]})")
    dt = attrs.get("dtype")
    if dt is not None and str(dt) not in WEIGHT_DTYPES:
        raise InputError(f"{where}: its dtype attribute is {dt!r}, not one of {WEIGHT_DTYPES}")
    if attrs.get("n_edges") is not None and int(attrs["n_edges"]) != m:
        raise InputError(f"{where}: it says {attrs['n_edges']} edges but holds {m}")
    n = attrs.get("n")
    if n is not None and m != max(int(n) - 1, 0):
        raise InputError(f"{where}: it says {n} points but holds {m} edges: a spanning tree "
                         f"of {n} points has {max(int(n) - 1, 0)}")
    if int(attrs.get("min_samples") or 1) > 1:
        core = arrays.get("core_distances")
        want = int(n) if n is not None else m + 1
        if core is None or core.shape[0] != want or core.dtype.kind != "f":
            raise InputError(f"{where}: a mutual-reachability store (min_samples="
                             f"{attrs['min_samples']}) needs the {want} core distances; "
                             + ("it has none" if core is None else
                                f"it holds {core.shape[0]} {core.dtype}"))


def check_tree(where: str, source, target, weight, n: int, core=None):
    """Refuse arrays that are not a spanning tree of ``n`` points.

    Parameters
    ----------
    source, target : (m,) int64 numpy arrays
    weight : (m,) float numpy array
    n : int
    core : (n,) float numpy array or None (mutual reachability)
    """
    m = source.shape[0]
    if m != max(n - 1, 0):
        raise InputError(f"{where}: {m} edges for {n} points: not a spanning tree")
    if m == 0:
        return
    lo, hi = min(int(source.min()), int(target.min())), max(int(source.max()),
                                                            int(target.max()))
    if lo < 0 or hi >= n:
        raise InputError(f"{where}: row ids from {lo} to {hi}, outside [0, {n})")
    bad = ~np.isfinite(weight) | (weight < 0)
    if bad.any():
        k = int(np.argmax(bad))
        raise InputError(f"{where}: edge {k} weighs {float(weight[k])!r}; weights are "
                         "finite and >= 0")
    if core is not None and (not np.isfinite(core).all() or (core < 0).any()):
        raise InputError(f"{where}: its core distances are not all finite and >= 0")
    k = first_cycle_edge(source, target, n)
    if k >= 0:
        raise InputError(f"{where}: edge {k} ({int(source[k])}, {int(target[k])}) closes a "
                         "cycle: not a spanning tree")


@njit(cache=True)
def first_cycle_edge(source, target, n):
    """The first edge joining two points already joined (-1: none)."""
    parent = np.arange(n)
    for k in range(source.shape[0]):
        a, b = source[k], target[k]
        while parent[a] != a:
            parent[a] = parent[parent[a]]
            a = parent[a]
        while parent[b] != b:
            parent[b] = parent[parent[b]]
            b = parent[b]
        if a == b:
            return k
        parent[max(a, b)] = min(a, b)
    return -1
