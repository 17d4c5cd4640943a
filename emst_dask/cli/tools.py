"""``emst-dask generate``, ``info``, ``plot``, ``demo``, ``clean`` and ``warm``."""
from __future__ import annotations

import os
import time

import click

from .group import Count, main
from .errors import UserError


@main.command()
@click.argument("name", type=click.Choice(["uniform", "normal", "halos"]))
@click.argument("n", type=Count())
@click.option("--out", "-o", required=True, type=click.Path(dir_okay=True),
              help="where to write the (N, D) float32 cloud: FILE.npy, or a Zarr "
                   "snapshot (any other name, e.g. SNAPSHOT.zarr)")
@click.option("--dim", "-d", default=3, show_default=True, type=click.IntRange(1, 8),
              help="number of coordinates")
@click.option("--seed", "-s", default=0, show_default=True, type=int,
              help="random seed; the same (NAME, N, D, SEED) gives the same cloud")
@click.option("--chunk-rows", default=1_000_000, show_default=True, type=Count(minimum=1),
              help="Zarr: rows per chunk")
@click.option("--zarr-format", default=3, show_default=True, type=click.Choice(["2", "3"]),
              help="Zarr: format version of the snapshot")
@click.option("--columns", default=None, metavar="x,y,z",
              help="Zarr: write D 1-D coordinate arrays with these names instead of "
                   "one (N, D) array named 'points'")
@click.option("--overwrite", is_flag=True,
              help="replace an existing .npy file or a snapshot that generate wrote")
@click.option("--chunked", is_flag=True,
              help="the chunked variant of NAME (uniform, halos): each Zarr chunk made "
                   "from (SEED, chunk index) alone, by all cores at once and never whole "
                   "in memory; the same statistics, other points (it depends on "
                   "--chunk-rows too)")
@click.option("--processes", default=None, type=click.IntRange(1),
              help="--chunked: processes (default: the machine's cores)")
def generate(name, n, out, dim, seed, chunk_rows, zarr_format, columns, overwrite, chunked,
             processes):
    """Write a reference point cloud NAME (uniform, normal, halos) of N points."""
    import psutil

    if chunked:
        from ..io.snapshot import write_chunked

        if columns or out.endswith(".npy"):
            raise UserError("--chunked writes one (N, D) array to a Zarr snapshot "
                            "(no --columns, no .npy)")
        t0 = time.perf_counter()
        try:
            write_chunked(out, name, n, dim=dim, seed=seed, chunk_rows=chunk_rows,
                          processes=processes, zarr_format=int(zarr_format),
                          overwrite=overwrite)
        except ValueError as exc:
            raise UserError(str(exc)) from None
        click.echo(f"{name} (chunked): n={n} d={dim} dtype=float32 seed={seed} "
                   f"chunk_rows={chunk_rows} -> {out} ({time.perf_counter() - t0:.2f} s)")
        return

    from .. import datasets
    from ..io.snapshot import write_points
    from ..io.source import parse_columns

    t0 = time.perf_counter()
    names = parse_columns(columns)
    if names is not None and out.endswith(".npy"):
        raise UserError("--columns needs a Zarr output (not .npy)")
    from ..io import resolve_output

    resolve_output(out, overwrite=overwrite, contents="points")  # before generating
    need, free = n * dim * 4, psutil.virtual_memory().available
    if need > free:
        raise UserError(f"{n} points of {dim} float32 coordinates take {need / 2**30:.3g} GiB; "
                        f"this machine has {free / 2**30:.3g} GiB free")
    pts = datasets.GENERATORS[name](n, dim=dim, seed=seed)
    write_points(out, pts, chunk_rows=chunk_rows, zarr_format=int(zarr_format), columns=names,
                 attrs={"generator": name, "n": int(n), "d": int(dim), "seed": int(seed)},
                 overwrite=overwrite)
    click.echo(f"{name}: n={pts.shape[0]} d={pts.shape[1]} dtype={pts.dtype} "
               f"seed={seed} -> {out} ({time.perf_counter() - t0:.2f} s)")


@main.command()
@click.argument("edges", type=click.Path())
def info(edges):
    """Describe the edge store EDGES (.zarr, or an (m, 3) .npy)."""
    import numpy as np

    from ..io import open_edges

    st = open_edges(edges)
    w = np.asarray(st.read_array("weight"), np.float64)
    a = st.attrs
    click.echo(f"path={st.path}")
    click.echo(f"n={a.get('n')} d={a.get('d')} edges={a.get('n_edges')} "
               f"min_samples={a.get('min_samples')} dtype={a.get('dtype')}")
    click.echo(f"total_weight={a.get('total_weight')!r}")
    if len(w):
        click.echo(f"weight min={float(w.min())!r} median={float(np.median(w))!r} "
                   f"max={float(w.max())!r}")
    else:
        click.echo("weight min=- median=- max=-")
    click.echo(f"input={a.get('input')}")
    click.echo(f"version={a.get('version')} backend={a.get('backend')} "
               f"iterations={a.get('iterations')} created={a.get('created')}")


@main.command()
@click.argument("edges", type=click.Path())
@click.option("--points", "-p", "points", required=True, type=click.Path(),
              help="the point cloud the edges index (.npy or Zarr)")
@click.option("--out", "-o", required=True, type=click.Path(dir_okay=False),
              help="the picture to write (.png, .pdf or .svg)")
@click.option("--columns", default=None, metavar="x,y,z",
              help="Zarr group: the 1-D coordinate arrays, in order")
@click.option("--array", default=None, metavar="NAME", help="Zarr group: the (n, d) array")
@click.option("--slab", default=0.02, show_default=True, type=click.FloatRange(0, 1,
              min_open=True), help="slab thickness, as a fraction of the z extent")
@click.option("--max-points", default=30_000, show_default=True, type=Count(),
              help="crop the slab in x-y to about this many points")
@click.option("--ignore-input", is_flag=True,
              help="accept points from another place than the store's recorded input "
                   "(same n and d; a moved snapshot)")
@click.option("--overwrite", is_flag=True, help="replace a picture this package drew")
def plot(edges, points, out, columns, array, slab, max_points, ignore_input, overwrite):
    """Draw the tree: the edges of a thin slab in z projected to x-y, and the
    edge-length histogram (log scale)."""
    from ..products.plotting import plot_tree

    try:
        summary = plot_tree(edges, points, out, columns=columns, array=array, slab=slab,
                            max_points=max_points, ignore_input=ignore_input,
                            overwrite=overwrite)
    except OSError as exc:
        raise UserError(f"cannot write {out}: {exc.strerror or exc}") from None
    click.echo(summary)
    click.echo(f"wrote {os.path.abspath(out)}")


@main.command()
@click.option("--dir", "workdir", default="emst-demo", show_default=True,
              type=click.Path(file_okay=False),
              help="where to put the snapshot, edges and picture (made if missing; "
                   "a later demo replaces what an earlier one wrote there)")
@click.option("--n", "n", default=200_000, show_default=True, type=Count(),
              help="points in the halos cloud")
@click.option("--workers", default=None, type=click.IntRange(1, 64),
              help="workers of the embedded cluster (default: one per GPU, or 1)")
@click.option("--backend", "-b", default="auto", show_default=True,
              type=click.Choice(["auto", "cpu", "cuda"]))
@click.option("--progress/--no-progress", default=True, show_default=True)
def demo(workdir, n, workers, backend, progress):
    """Generate a halos cloud as a Zarr snapshot, compute its tree on the
    embedded default cluster, write the edge store, draw it."""
    from .. import datasets
    from ..distributed.cluster import EmbeddedCluster
    from ..distributed.service import emst as service_emst
    from ..io.snapshot import write_points
    from ..products.plotting import plot_tree

    workdir = os.path.abspath(workdir)
    os.makedirs(workdir, exist_ok=True)
    click.echo(f"demo files go to {workdir}")
    snap = os.path.join(workdir, "halos.zarr")
    edges = os.path.join(workdir, "edges.zarr")
    png = os.path.join(workdir, "mst.png")
    t0 = time.perf_counter()
    pts = datasets.halos(n, dim=3, seed=0)
    write_points(snap, pts, chunk_rows=max(1, -(-n // 8)), zarr_format=3,
                 attrs={"generator": "halos", "n": int(n), "d": 3, "seed": 0}, overwrite=True)
    click.echo(f"snapshot: {snap} (halos, n={n}, d=3, 8 chunks, "
               f"{time.perf_counter() - t0:.1f} s)")
    t0 = time.perf_counter()
    with EmbeddedCluster(n_workers=workers, backend=backend) as emb:
        nw = len(emb.client.scheduler_info()["workers"])
        click.echo(f"cluster: {emb.kind} with {nw} worker(s), dashboard "
                   f"{emb.dashboard_link} ({time.perf_counter() - t0:.1f} s to start)")
        t0 = time.perf_counter()
        store = service_emst(snap, client=emb.client, out=edges, backend=backend,
                             overwrite=True, progress=True if progress else None)
        seconds = time.perf_counter() - t0
    click.echo(f"edges: {os.fspath(store)} ({store.n_edges} edges, total weight "
               f"{store.total_weight:.6g}, {seconds:.1f} s end to end)")
    summary = plot_tree(edges, snap, png, overwrite=True)  # its own, from a run before
    click.echo(f"picture: {png} ({summary})")
    click.echo(f"look: emst-dask info {store.path}")
    click.echo(f"everything is in {workdir}")


@main.command()
@click.argument("directory", type=click.Path(exists=True, file_okay=False))
@click.option("--older-than", "hours", default=24.0, show_default=True,
              type=click.FloatRange(0), help="only temporaries nothing touched for this "
              "many hours (a job still writing one touches it)")
@click.option("--dry-run", is_flag=True, help="only list what would be removed")
def clean(directory, hours, dry_run):
    """Remove the temporaries dead jobs left in DIRECTORY.

    A job writes each output to a hidden sibling .NAME.emst-tmp-JOB-TAG and
    removes it when it ends; a scheduler or client killed meanwhile leaves
    it.  Only temporaries carrying the package's mark (an edge, cluster or
    snapshot store holding only its own arrays, or a .npy or picture this
    package writes) and untouched for --older-than hours are removed; a
    former output set aside while being replaced is kept and said, and so is
    anything else.
    """
    from ..io.leftovers import clean as clean_dir

    removed, kept = clean_dir(directory, hours * 3600.0, dry_run=dry_run)
    verb = "would remove" if dry_run else "removed"
    for t in removed:
        click.echo(f"{verb} {t.path} (a temporary of {os.path.basename(t.output)}, "
                   f"untouched {t.age / 3600:.3g} h)")
    for t, why in kept:
        click.echo(f"kept {t.path}: {why}")
    click.echo(f"{len(removed)} {verb}, {len(kept)} kept in {os.path.abspath(directory)}")


@main.command()
@click.option("--dims", default=",".join(map(str, (2, 3))), show_default=True,
              metavar="D,D,...", help="dimensions to compile for (1 to 8; 1-8 for all)")
@click.option("--dtypes", default="float32,float64", show_default=True,
              help="point dtypes to compile for")
@click.option("--products/--no-products", default=True, show_default=True,
              help="also the kernels of clusters, cuts, FoF, statistics and partitions")
@click.option("--jobs", "-j", default=None, type=click.IntRange(1, 512),
              help="processes at once (default: every core)")
def warm(dims, dtypes, products, jobs):
    """Compile the CPU kernels ahead of time, into numba's cache (a first run
    would otherwise spend a minute or two compiling)."""
    from ..warm import warm as warm_cache

    try:
        if "-" in dims:
            lo, hi = (int(v) for v in dims.split("-"))
            ds = list(range(lo, hi + 1))
        else:
            ds = [int(v) for v in dims.split(",") if v.strip()]
    except ValueError:
        raise UserError(f"--dims: expected D,D,... or LO-HI, got {dims!r}") from None
    if not ds or not all(1 <= d <= 8 for d in ds):
        raise UserError(f"--dims: dimensions 1 to 8, got {dims!r}")
    ts = [t.strip() for t in dtypes.split(",") if t.strip()]
    if not ts or not set(ts) <= {"float32", "float64"}:
        raise UserError(f"--dtypes: float32 and/or float64, got {dtypes!r}")
    seconds = warm_cache(ds, ts, products=products, jobs=jobs, report=click.echo)
    click.echo(f"compiled in {seconds:.1f} s; runs of these dtypes and dimensions now "
               f"load the kernels from the cache")
