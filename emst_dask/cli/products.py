"""``emst-dask hdbscan``, ``cut``, ``linkage`` and ``plot-clusters``: what
is computed from a tree."""
from __future__ import annotations

import os
import sys
import time

import click

from ..io.paths import locations
from .group import main
from .errors import UserError


def _is_edge_store(path) -> bool:
    from ..io.output import EDGE_FORMAT, zarr_group_attrs

    attrs = zarr_group_attrs(os.path.abspath(path)) if os.path.isdir(path) else None
    return bool(attrs) and attrs.get("format") == EDGE_FORMAT


def _check_store_k(edges, est):
    """The options checked first; then a tree of another k_pts than they ask
    for: say which option fits it, and which command computes the tree
    they need."""
    from ..io import open_edges
    from ..products.estimator import check_hdbscan_params

    st = open_edges(edges)
    have, n = st.attrs.get("min_samples"), st.attrs.get("n")
    min_samples, min_cluster_size = est.min_samples, est.min_cluster_size
    want = min_samples if min_samples is not None else min_cluster_size
    if n:
        check_hdbscan_params(min_cluster_size, min_samples, est.cluster_selection_epsilon,
                             est.max_cluster_size, est.cluster_selection_method,
                             est.allow_single_cluster, int(n))
    if have is not None and want is not None and int(have) != int(want):
        how = ("--min-samples" if min_samples is not None
               else f"--min-samples (default: --min-cluster-size {min_cluster_size})")
        raise UserError(f"{st.path}: the tree was computed with --min-samples {have}, and "
                        f"{how} asks for {want}: give --min-samples {have}, or compute the "
                        f"tree with  emst-dask run POINTS --min-samples {want} --out "
                        f"EDGES.zarr  (or cluster the points: emst-dask hdbscan POINTS ...)")


def _euclidean_tree(edges):
    """The tree of a Euclidean edge store (cuts and single linkage need one)."""
    from ..io import open_edges

    st = open_edges(edges)
    k = st.attrs.get("min_samples")
    if k not in (None, 1):
        raise UserError(f"{st.path}: a mutual-reachability tree (min_samples={k}); cuts and "
                        "single linkage are defined on the Euclidean tree (min_samples=1), "
                        "HDBSCAN* on this one (emst-dask hdbscan)")
    return st


@main.command()
@click.argument("source", type=click.Path())
@click.option("--out", "-o", required=True, type=click.Path(),
              help="where the clusters go: a cluster store (LABELS.zarr: labels, "
                   "probabilities, outlier scores, condensed tree) or LABELS.npy (labels)")
@click.option("--min-cluster-size", "-m", required=True, type=int,
              help="the smallest size a cluster may have (>= 2)")
@click.option("--min-samples", "-k", default=None, type=int,
              help="k_pts, counting the point itself (default: --min-cluster-size)")
@click.option("--method", default="eom", show_default=True, type=click.Choice(["eom", "leaf"]),
              help="cluster selection")
@click.option("--epsilon", default=0.0, show_default=True, type=float,
              help="cluster_selection_epsilon (a distance)")
@click.option("--allow-single-cluster", is_flag=True, help="the root may be the one cluster")
@click.option("--max-cluster-size", default=None, type=int, help="clusters above are not kept")
@click.option("--scheduler", default=None, metavar="ADDRESS", help="run on this Dask scheduler")
@click.option("--scheduler-file", default=None, type=click.Path(dir_okay=False),
              help="run on the Dask scheduler of this file")
@click.option("--backend", "-b", default="auto", show_default=True,
              type=click.Choice(["auto", "cpu", "cuda"]))
@click.option("--columns", default=None, metavar="x,y,z", help="Zarr group: 1-D coordinates")
@click.option("--array", default=None, metavar="NAME", help="Zarr group: the (n, d) array")
@click.option("--overwrite", is_flag=True, help="replace labels this package wrote")
@click.option("--plot", "plot_png", default=None, type=click.Path(dir_okay=False),
              help="also draw the condensed tree to this picture (.png, .pdf or .svg; "
                   "needs a cluster store)")
@click.option("--progress/--no-progress", default=None,
              help="a progress bar (default: when stderr is a terminal)")
def hdbscan(source, out, min_cluster_size, min_samples, method, epsilon, allow_single_cluster,
            max_cluster_size, scheduler, scheduler_file, backend, columns, array, overwrite,
            plot_png, progress):
    """HDBSCAN* clusters of the points in SOURCE (or of a mutual-reachability
    edge store SOURCE, without recomputing its tree)."""
    from ..products.estimator import HDBSCAN
    from .run import _env_scheduler_file

    if scheduler and scheduler_file:
        raise UserError("give --scheduler or --scheduler-file, not both")
    scheduler_file = _env_scheduler_file(scheduler, scheduler_file)
    client = scheduler or (os.path.abspath(scheduler_file) if scheduler_file else None)
    if progress is None:
        progress = sys.stderr.isatty()
    picture = None
    if plot_png:
        from ..io.picture import resolve_picture

        if str(out).endswith(".npy"):
            raise UserError("--plot needs the condensed tree: write a cluster store "
                            "(LABELS.zarr), not .npy labels")
        picture = resolve_picture(plot_png, overwrite, locations(source))
    est = HDBSCAN(min_cluster_size=min_cluster_size, min_samples=min_samples,
                  cluster_selection_epsilon=epsilon, max_cluster_size=max_cluster_size,
                  cluster_selection_method=method, allow_single_cluster=allow_single_cluster,
                  backend=backend, client=client, out=out, overwrite=overwrite)
    t0 = time.perf_counter()
    if _is_edge_store(source):
        if columns or array:
            raise UserError("--columns and --array select points; SOURCE is an edge store")
        from ..io import resolve_output
        from ..io.cluster_store import write_clusters

        output = resolve_output(out, overwrite=overwrite, contents="clusters",
                                source_location=locations(source))
        _check_store_k(source, est)
        est.set_params(out=None).fit_tree(source)
        c = est.condensed_tree_.to_numpy()
        write_clusters(output, {"labels": est.labels_, "probabilities": est.probabilities_,
                                "outlier_scores": est.outlier_scores_,
                                "persistence": est.cluster_persistence_,
                                "condensed/parent": c["parent"], "condensed/child": c["child"],
                                "condensed/lambda_val": c["lambda_val"],
                                "condensed/child_size": c["child_size"]},
                       dict(kind="hdbscan", n=len(est.labels_), input=os.path.abspath(source),
                            n_clusters=len(est.condensed_tree_.selected),
                            selected=est.condensed_tree_.selected, **est._clusters_params()))
    else:
        if columns or array:
            from ..io import resolve_source

            source = resolve_source(source, array=array, columns=columns)
        est.fit(source, progress=progress or None)
    seconds = time.perf_counter() - t0
    labels = est.labels_
    n_clusters = int(labels.max()) + 1 if len(labels) else 0
    noise = int((labels < 0).sum())
    click.echo(f"n={len(labels)} clusters={n_clusters} noise={noise} "
               f"({100.0 * noise / max(len(labels), 1):.1f}%) seconds={seconds:.3f}")
    click.echo(f"wrote {os.path.abspath(out) if '://' not in str(out) else out}")
    if picture is not None:
        click.echo(f"wrote {_plot_condensed(est.condensed_tree_, picture)}")


def _plot_condensed(ct, picture):
    """Draw the condensed tree ``ct`` to the checked Output ``picture``."""
    from matplotlib.figure import Figure  # no pyplot: no backend is chosen

    from ..io.picture import save

    fig = Figure(figsize=(9, 5.5), layout="constrained")
    ct.plot(ax=fig.subplots())
    return save(fig, picture)


@main.command()
@click.argument("edges", type=click.Path())
@click.option("--linking-length", "-b", "lengths", required=True, multiple=True, type=float,
              help="an absolute linking length b (repeat for several: one pass)")
@click.option("--out", "-o", required=True, type=click.Path(),
              help="LABELS.npy ((n,) or (K, n) int64) or a cluster store LABELS.zarr")
@click.option("--overwrite", is_flag=True, help="replace labels this package wrote")
def cut(edges, lengths, out, overwrite):
    """Friends-of-friends groups of the Euclidean tree EDGES at linking
    lengths B: the components of its edges of weight <= B, numbered by
    their smallest row."""
    from ..io import resolve_output
    from ..io.cluster_store import write_clusters
    from ..products.cuts import check_lengths, fof_labels

    check_lengths(list(lengths))
    output = resolve_output(out, overwrite=overwrite, contents="clusters",
                            source_location=locations(edges))
    st = _euclidean_tree(edges)
    tree = st.load()
    labels = fof_labels(tree.source, tree.target, tree.weight, tree.n_points,
                        list(lengths) if len(lengths) > 1 else lengths[0])
    write_clusters(output, {"labels": labels},
                   dict(kind="fof", n=int(tree.n_points), linking_lengths=list(lengths),
                        input=str(st.path)))
    rows = labels.reshape(len(lengths), -1)
    for b, row in zip(lengths, rows):
        click.echo(f"b={b!r}: {int(row.max()) + 1 if len(row) else 0} groups")
    click.echo(f"wrote {output}")


@main.command()
@click.argument("edges", type=click.Path())
@click.option("--out", "-o", required=True, type=click.Path(dir_okay=False),
              help="Z.npy: the (n-1, 4) float64 scipy linkage matrix")
@click.option("--overwrite", is_flag=True, help="replace a linkage matrix this package wrote")
def linkage(edges, out, overwrite):
    """The single-linkage hierarchy of the Euclidean tree EDGES, as a scipy
    linkage matrix (merges of equal height in the strict edge order)."""
    from ..io import npy, resolve_output
    from ..products.linkage import single_linkage

    if not out.endswith(".npy"):
        raise UserError(f"{out}: the linkage matrix is written as a .npy file")
    output = resolve_output(out, overwrite=overwrite, contents="linkage",
                            source_location=locations(edges))
    st = _euclidean_tree(edges)
    tree = st.load()
    Z = single_linkage(tree.source, tree.target, tree.weight, tree.n_points)
    output.check(locations(edges))
    with output.written_aside() as tmp, open(tmp, "wb") as fh:
        npy.save(fh, Z, "linkage")
    click.echo(f"n={tree.n_points} merges={len(Z)} "
               f"height max={float(Z[:, 2].max()) if len(Z) else 0.0!r}")
    click.echo(f"wrote {output}")


@main.command("plot-clusters")
@click.argument("labels", type=click.Path())
@click.option("--points", "-p", "points", required=True, type=click.Path(),
              help="the point cloud the labels are of (.npy or Zarr)")
@click.option("--out", "-o", required=True, type=click.Path(dir_okay=False),
              help="the picture to write (.png, .pdf or .svg)")
@click.option("--columns", default=None, metavar="x,y,z", help="Zarr group: 1-D coordinates")
@click.option("--array", default=None, metavar="NAME", help="Zarr group: the (n, d) array")
@click.option("--slab", default=0.02, show_default=True,
              type=click.FloatRange(0, 1, min_open=True),
              help="slab thickness, as a fraction of the z extent")
@click.option("--row", default=0, show_default=True, type=int,
              help="which linking length of a (K, n) cut")
@click.option("--overwrite", is_flag=True, help="replace a picture this package drew")
def plot_clusters(labels, points, out, columns, array, slab, row, overwrite):
    """Draw the points of a thin slab in z coloured by cluster (noise grey)."""
    from ..products.plotting import plot_clusters as draw

    summary = draw(labels, points, out, columns=columns, array=array, slab=slab, row=row,
                   overwrite=overwrite)
    click.echo(summary)
    click.echo(f"wrote {out}")
