"""The check of a given tree against its points on the device
(``products.tree_checks.check_weights_xp``): the same refusals and messages
as the host's, with nothing of the tree or the points copied back.

Without a GPU the device path runs with ``cupy_emu`` standing in for CuPy
(the kernel built with g++); the ``gpu`` tests run it on CuPy arrays.
"""
from __future__ import annotations

import numpy as np
import pytest

import emst_dask
from emst_dask import InputError, emst
from emst_dask.products import tree_checks
from emst_dask.products.tree_checks import check_weights_of, check_weights_xp





def _message(fn):
    with pytest.raises(InputError) as e:
        fn()
    return str(e.value)


def _cases(seed=3):
    """(tree, right points, box): a periodic and an open tree."""
    rng = np.random.default_rng(seed)
    p = rng.random((3000, 3))
    yield emst(p, backend="cpu", box_size=1.0), p, np.ones(3)
    q = rng.normal(size=(2500, 2)).astype(np.float32)
    yield emst(q, backend="cpu"), q, None


@pytest.mark.parametrize("chunk", [1 << 20, 700])
def test_emulated_device_check_equals_host(fake_cupy, monkeypatch, chunk):
    """Right points pass; moved rows, a row beyond n, the wrong box are
    refused with the host's message word for word (the first bad edge in
    edge order and the count), over one chunk or several."""
    monkeypatch.setattr(tree_checks, "CHECKED_EDGES", chunk)
    for tree, p, box in _cases():
        check_weights_xp(fake_cupy, tree, p, box, "the cloud")  # passes
        q = p.copy()
        q[[17, 2222]] = q[[5, 6]]  # two rows moved onto others
        host = _message(lambda: check_weights_of(tree, q, box, "the cloud"))
        dev = _message(lambda: check_weights_xp(fake_cupy, tree, q, box, "the cloud"))
        assert dev == host
        assert "is not the tree of the cloud: its edge (" in dev
        short = p[:-1]  # the tree indexes row n - 1
        host = _message(lambda: check_weights_of(tree, short, box))
        assert _message(lambda: check_weights_xp(fake_cupy, tree, short, box)) == host
        assert "rows beyond the" in host
    tree, p, box = next(_cases())
    # the same points taken in an open box: the edges across the faces differ
    assert "is not the tree" in _message(lambda: check_weights_xp(fake_cupy, tree, p, None))


@pytest.mark.parametrize("chunk", [None, 700])
def test_emulated_device_tree_in_few_chunks(fake_cupy, monkeypatch, chunk):
    """A tree already on the device is checked ``CHECKED_DEVICE_EDGES`` at a
    time, not ``CHECKED_EDGES`` (each chunk some ten launches): one kernel
    launch for these 3,000 edges, and the host's message over several."""
    from emst_dask.kernels.cuda import weights

    calls = []
    real = weights.weight_flags

    def counted(*a):
        calls.append(1)
        return real(*a)

    monkeypatch.setattr(weights, "weight_flags", counted)
    monkeypatch.setattr(tree_checks, "CHECKED_EDGES", 100)
    monkeypatch.setattr(tree_checks, "is_device_array", lambda a: True)  # the tree's arrays
    if chunk:
        monkeypatch.setattr(tree_checks, "CHECKED_DEVICE_EDGES", chunk)
    tree, p, box = next(_cases())
    m = int(tree.n_edges)
    check_weights_xp(fake_cupy, tree, p, box, "the cloud")
    assert len(calls) == (1 if chunk is None else -(-m // chunk))
    q = p.copy()
    q[[17, 2222]] = q[[5, 6]]
    monkeypatch.setattr(tree_checks, "is_device_array", lambda a: False)
    host = _message(lambda: check_weights_of(tree, q, box, "the cloud"))
    monkeypatch.setattr(tree_checks, "is_device_array", lambda a: True)
    assert _message(lambda: check_weights_xp(fake_cupy, tree, q, box, "the cloud")) == host


def test_a_negative_row_is_refused():
    tree, p, box = next(_cases())
    tree.source = tree.source.copy()
    tree.source[10] = -1
    assert "rows beyond the 3000 rows" in _message(lambda: check_weights_of(tree, p, box))


@pytest.mark.gpu
def test_device_check_names_the_edge_without_copying_the_tree(monkeypatch):
    """On CuPy arrays: right points pass, wrong ones are refused with the
    host's message; what comes back to the host is a few numbers and the
    two rows of the edge named, never the tree or the points."""
    import cupy

    back = []

    def counted(a):
        got = np.asarray(a.get() if hasattr(a, "get") and not isinstance(a, np.ndarray) else a)
        back.append(got.size)
        return got

    monkeypatch.setattr(tree_checks, "to_host", counted)
    monkeypatch.setattr(tree_checks, "CHECKED_EDGES", 1000)
    rng = np.random.default_rng(5)
    p = rng.random((5000, 3)).astype(np.float32)
    for box in (1.0, None):
        tree = emst(cupy.asarray(p), backend="cuda", box_size=box)
        assert isinstance(tree.source, cupy.ndarray)
        b = None if box is None else np.ones(3)
        check_weights_of(tree, cupy.asarray(p), b, "the cloud")
        check_weights_of(tree, p, b, "the cloud")  # host points, device tree
        q = p.copy()
        q[[17, 4001]] = q[[5, 6]]
        host_tree = emst(p, backend="cpu", box_size=box)
        host_tree.source, host_tree.target, host_tree.weight = (
            a.get() for a in (tree.source, tree.target, tree.weight))
        want = _message(lambda: check_weights_of(host_tree, q, b, "the cloud"))
        back.clear()
        got = _message(lambda: check_weights_of(tree, cupy.asarray(q), b, "the cloud"))
        assert got == want and "its edge (" in got
        assert back and max(back) <= 3, back
        with pytest.raises(InputError, match="is not the tree of"):
            emst_dask.fof(cupy.asarray(q), 0.01, relative=False, box_size=box,
                          min_members=2, tree=tree)
