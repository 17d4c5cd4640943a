"""Many realisations of one catalogue (``mst_statistics_many``).

Each realisation is redrawn independently here (numpy, the same seed
spawning), its MST computed by scipy on a dense distance matrix and its
statistics by MiSTree's functions; the batch's histograms, mean and spread
must be those.  The batch is the same in this process and on a cluster,
whatever order the workers finish in.
"""
from __future__ import annotations

import numpy as np
import pytest

from emst_dask import EmbeddedCluster, InputError, mst_statistics_many
from emst_dask.products.realisations import Realisation, draw, realisation_seeds

mistree = pytest.importorskip("mistree")


@pytest.fixture(scope="module")
def catalogue():
    rng = np.random.default_rng(0)
    centres = rng.random((8, 3))
    pts = centres[rng.integers(0, 8, 600)] + rng.normal(0, 0.04, (600, 3))
    return np.mod(pts, 1.0)


@pytest.fixture(scope="module")
def client():
    with EmbeddedCluster(n_workers=2, backend="cpu") as emb:
        yield emb.client


def oracle_histogram(x, L, bins_l, bins_b, bins_s):
    """A realisation's histograms from scipy's MST and MiSTree's functions
    (the end-to-end distance under the minimum image by hand: MiSTree's
    shape has no periodic box)."""
    from scipy.sparse.csgraph import minimum_spanning_tree

    diff = np.abs(x[:, None, :] - x[None, :, :])
    if L is not None:
        diff = np.minimum(diff, L - diff)
    dist = np.sqrt((diff ** 2).sum(-1))
    mst = minimum_spanning_tree(dist).tocoo()
    s, t, w = mst.row.astype(np.int64), mst.col.astype(np.int64), mst.data
    edge_index = np.array([s, t])
    degree = mistree.get_graph_degree(edge_index, len(x))
    edge_degree = mistree.get_degree_for_edges(edge_index, degree)
    index, _rest = mistree.get_branch_index(edge_index, edge_degree)
    length = np.array([w[b].sum() for b in index])
    ends = mistree.get_branch_end_index(edge_index, edge_degree, index)
    dx = np.abs(x[ends[0]] - x[ends[1]])
    if L is not None:
        dx = np.minimum(dx, L - dx)
    shape = np.sqrt((dx ** 2).sum(-1)) / length
    return {"degree": np.histogram(degree, np.linspace(0.5, 6.5, 7), density=True)[0],
            "edge_length": np.histogram(w, bins_l, density=True)[0],
            "branch_length": np.histogram(length, bins_b, density=True)[0],
            "branch_shape": np.histogram(np.sqrt(1 - shape), bins_s, density=True)[0]}


def test_batch_equals_independent_oracle(catalogue):
    bins = {"l_range": (0.0, 0.2), "b_range": (0.0, 0.6)}
    ens = mst_statistics_many(catalogue, 4, subsample=0.5, jitter=0.002, box_size=1.0,
                              seed=7, bins=bins, backend="cpu")
    assert ens.realisations == 4
    seeds = realisation_seeds(7, 4)
    how = Realisation(0.5, 0.002, np.ones(3))
    for r in range(4):
        x = draw(catalogue, how, seeds[r])
        assert ens.n[r] == len(x)
        want = oracle_histogram(x, 1.0, ens.edges["edge_length"], ens.edges["branch_length"],
                                ens.edges["branch_shape"])
        for name, v in want.items():
            np.testing.assert_allclose(ens.values[name][r], v, rtol=1e-9, atol=1e-9,
                                       err_msg=f"realisation {r} {name}")
    np.testing.assert_allclose(ens.mean("degree"), ens.values["degree"].mean(axis=0))
    np.testing.assert_allclose(ens.std("edge_length"),
                               ens.values["edge_length"].std(axis=0, ddof=1))
    # the realisations differ: subsamples of one catalogue are not one tree
    assert len(set(ens.n.tolist())) > 1


def test_draw_subsample_and_jitter(catalogue):
    seeds = realisation_seeds(1, 2)
    exact = draw(catalogue, Realisation(100, None, None), seeds[0])
    assert exact.shape == (100, 3)
    assert set(map(tuple, exact)) <= set(map(tuple, catalogue))
    moved = draw(catalogue, Realisation(None, 0.5, np.ones(3)), seeds[1])
    assert moved.shape == catalogue.shape
    assert ((moved >= 0) & (moved < 1)).all()  # wrapped into the box
    again = draw(catalogue, Realisation(None, 0.5, np.ones(3)), realisation_seeds(1, 2)[1])
    np.testing.assert_array_equal(moved, again)


def test_cluster_batch_is_the_in_process_batch(catalogue, client):
    kw = dict(subsample=300, box_size=1.0, seed=3, backend="cpu")
    here = mst_statistics_many(catalogue, 5, **kw)
    there = mst_statistics_many(catalogue, 5, client=client, **kw)
    for name in here.values:
        np.testing.assert_array_equal(here.edges[name], there.edges[name])
        np.testing.assert_array_equal(here.values[name], there.values[name])
    assert here.summaries == there.summaries
    # shared bins from realisation 0: nothing fell outside, and it is said
    assert all(v.shape == (5,) for v in here.outside.values())


def test_snapshot_catalogue_on_the_cluster(catalogue, client, tmp_path):
    from emst_dask.io.snapshot import write_points

    write_points(tmp_path / "cat.zarr", catalogue, chunk_rows=128, attrs={"BoxSize": 1.0})
    ens = mst_statistics_many(str(tmp_path / "cat.zarr"), 3, subsample=0.8,
                              box_size="snapshot", client=client, seed=5, backend="cpu")
    mem = mst_statistics_many(catalogue, 3, subsample=0.8, box_size=1.0, seed=5,
                              backend="cpu")
    np.testing.assert_array_equal(ens.values["branch_length"], mem.values["branch_length"])


def test_plot(tmp_path, catalogue):
    ens = mst_statistics_many(catalogue, 2, subsample=0.5, seed=0, backend="cpu")
    ens.plot(tmp_path / "ens.png")
    assert (tmp_path / "ens.png").stat().st_size > 0


@pytest.mark.parametrize("kw, words", [
    (dict(realisations=0), "realisations"), (dict(subsample=1.5), "subsample"),
    (dict(subsample=0), "subsample"), (dict(subsample=10_000), "subsample"),
    (dict(jitter=-1.0), "jitter"), (dict(jitter=np.nan), "jitter"),
    (dict(box_size=0.5), "outside the periodic box"), (dict(box_size="snapshot"), "snapshot"),
])
def test_bad_input_before_any_work(catalogue, kw, words):
    kw = dict(dict(realisations=2), **kw)
    with pytest.raises(InputError, match=words):
        mst_statistics_many(catalogue, backend="cpu", **kw)
