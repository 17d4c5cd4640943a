"""``emst-dask stats``: MiSTree's MST statistics of an edge store."""
from __future__ import annotations

import os
import time

import click
import numpy as np

from .group import main
from .errors import UserError

#: the ``format`` entry of a statistics .npz this package wrote
STATS_FORMAT = "emst-dask-mst-statistics"


def parse_box_size(text):
    """``--box-size`` text, ``L`` or ``Lx,Ly,Lz``, as a float or a list of
    floats (checked later against the points); None stays None."""
    if text is None:
        return None
    parts = [p.strip() for p in str(text).split(",")]
    try:
        values = [float(p) for p in parts]
    except ValueError:
        raise UserError(f"--box-size must be a length L or lengths Lx,Ly,...; got "
                        f"{text!r}") from None
    return values[0] if len(values) == 1 else values


def _stats_output(out, overwrite, sources=()):
    """The checked .npz output (only a statistics file this package wrote
    may be replaced)."""
    from ..io.output import Output

    class StatsOutput(Output):
        def why_not_replaceable(self, loc):
            if os.path.islink(loc):
                return "is a symbolic link"
            if not os.path.isfile(loc):
                return "is not a file"
            try:
                with np.load(loc, allow_pickle=False) as z:
                    ok = "format" in z.files and str(z["format"]) == STATS_FORMAT
            except Exception:
                ok = False
            return None if ok else "is not a statistics file emst-dask wrote"

    if not str(out).endswith(".npz"):
        raise UserError(f"{out}: the statistics are written as a .npz file")
    return StatsOutput(os.path.abspath(out), kind="npz", overwrite=bool(overwrite),
                       contents="statistics").check(list(sources))


@main.command()
@click.argument("edges", type=click.Path())
@click.option("--points", "-p", "points", required=True, type=click.Path(),
              help="the point cloud the edges index (.npy or Zarr)")
@click.option("--box-size", "box_size", default=None, metavar="L|Lx,Ly,Lz",
              help="periodic box: branch shapes under the minimum image (default: the "
                   "tree's box, if it has one)")
@click.option("--plot", "plot_png", default=None, type=click.Path(dir_okay=False),
              help="draw the four histograms to this picture (.png, .pdf or .svg)")
@click.option("--out", "-o", default=None, type=click.Path(dir_okay=False),
              help="STATS.npz: the statistics, branches and histograms")
@click.option("--overwrite", is_flag=True,
              help="replace a statistics file or a picture this package wrote")
@click.option("--columns", default=None, metavar="x,y,z",
              help="Zarr group: the 1-D coordinate arrays, in order")
@click.option("--array", default=None, metavar="NAME", help="Zarr group: the (n, d) array")
@click.option("--ignore-input", is_flag=True,
              help="accept points from another place than the store's recorded input "
                   "(same n and d; a moved snapshot)")
def stats(edges, points, box_size, plot_png, out, overwrite, columns, array, ignore_input):
    """MiSTree's MST statistics of the tree EDGES (degree, edge length, branch
    length and shape), given the points it was computed from (--points)."""
    from ..io import open_edges, resolve_source
    from ..io.paths import locations
    from ..io.picture import resolve_picture
    from ..products.plotting import check_points_of
    from ..products.statistics import check_box_size, mst_statistics
    from ..products.tree_checks import check_same_box, check_weights_of

    box = parse_box_size(box_size)
    inputs = locations(edges, points)
    output = _stats_output(out, overwrite, inputs) if out else None
    picture = resolve_picture(plot_png, overwrite, inputs) if plot_png else None
    store = open_edges(edges)
    src = resolve_source(points, array=array, columns=columns)
    check_points_of(store, src, points, edges, ignore_input)
    tree = store.load()
    if getattr(tree, "box_size", None) is None and store.attrs.get("box_size") is not None:
        tree.box_size = np.asarray(store.attrs["box_size"], np.float64)
    if box is None:
        box = getattr(tree, "box_size", None)
    # before reading the points; an open tree may be measured in a box
    checked = check_box_size(box, src.d)
    check_same_box(tree, checked, src.d, open_tree_ok=True)
    pts = src.read_all()
    periodic = getattr(tree, "box_size", None) is not None
    check_weights_of(tree, pts, checked if periodic else None, src.where)
    t0 = time.perf_counter()
    st = mst_statistics(tree.source, tree.target, tree.weight, tree.n_points, points=pts,
                        box_size=box)
    seconds = time.perf_counter() - t0
    sm = st.summary()
    click.echo(f"n={sm['n']} edges={sm['edges']} branches={sm['branches']} "
               f"seconds={seconds:.3f}" + (f" box={st.box_size.tolist()}"
                                           if st.box_size is not None else ""))
    click.echo(f"mean degree={sm['mean_degree']:.6g} edge length={sm['mean_edge_length']:.6g} "
               f"branch length={sm['mean_branch_length']:.6g} "
               f"branch edges={sm['mean_branch_edges']:.6g} "
               f"branch shape={sm['mean_branch_shape']:.6g}")
    if output is not None:
        arrays = {k: v for k, v in (
            ("degree", st.degree), ("edge_length", st.edge_length),
            ("branch_length", st.branch_length), ("branch_shape", st.branch_shape),
            ("branch_edge_count", st.branch_edge_count), ("branch_edges", st.branch_edges),
            ("branch_offsets", st.branch_offsets), ("branch_ends", st.branch_ends),
            ("box_size", st.box_size)) if v is not None}
        hist = st.histograms().as_mistree()
        arrays.update({f"hist_{k}": v for k, v in hist.items() if isinstance(v, np.ndarray)})
        with output.written_aside() as tmp, open(tmp, "wb") as fh:
            np.savez(fh, format=np.array(STATS_FORMAT), n=np.int64(st.n_points), **arrays)
        click.echo(f"wrote {output}")
    if picture is not None:
        st.plot(picture, title=f"MST statistics of {src.where} (n={sm['n']})")
        click.echo(f"wrote {picture}")
