"""The ``emst-dask`` command.

    emst-dask generate NAME N --out FILE.npy [--dim D] [--seed S]
    emst-dask run FILE.npy --out EDGES.npy [--min-samples K] [--backend auto|cpu|cuda]

Every subcommand is a function on the ``main`` group; later ones (info,
plot, demo, Zarr input and output) are added the same way.  Errors that are
the user's (bad input file, bad parameters) print one line, ``Error: ...``,
and exit with status 2; anything else is a bug and keeps its traceback.
"""
from __future__ import annotations

import os
import sys
import time

import click

from . import __version__

#: exit status for errors in what the user gave us (as click's usage errors)
EXIT_INPUT = 2


class InputProblem(click.ClickException):
    """A one-line ``Error: ...`` for the user, exit status 2."""

    exit_code = EXIT_INPUT


class Count(click.ParamType):
    """A non-negative point count: ``1000000``, ``1_000_000`` or ``1e6``."""

    name = "N"

    def convert(self, value, param, ctx):
        if isinstance(value, int):
            n = value
        else:
            text = str(value).strip()
            try:
                n = int(text)
            except ValueError:
                try:
                    f = float(text)
                except ValueError:
                    self.fail(f"{value!r} is not a number of points", param, ctx)
                if not f.is_integer():
                    self.fail(f"{value!r} is not a whole number of points", param, ctx)
                n = int(f)
        if n < 0:
            self.fail(f"the number of points must be >= 0, got {n}", param, ctx)
        return n


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="emst-dask")
def main():
    """Exact Euclidean minimum spanning trees (single-tree Borůvka)."""


@main.command()
@click.argument("name", type=click.Choice(["uniform", "normal", "halos"]))
@click.argument("n", type=Count())
@click.option("--out", "-o", required=True, type=click.Path(dir_okay=False),
              help="where to write the (N, D) float32 array (.npy)")
@click.option("--dim", "-d", default=3, show_default=True, type=click.IntRange(1, 8),
              help="number of coordinates")
@click.option("--seed", "-s", default=0, show_default=True, type=int,
              help="random seed; the same (NAME, N, D, SEED) gives the same cloud")
def generate(name, n, out, dim, seed):
    """Write a reference point cloud NAME (uniform, normal, halos) of N points."""
    from . import datasets

    t0 = time.perf_counter()
    pts = datasets.GENERATORS[name](n, dim=dim, seed=seed)
    _save(out, pts)
    click.echo(f"{name}: n={pts.shape[0]} d={pts.shape[1]} dtype={pts.dtype} "
               f"seed={seed} -> {out} ({time.perf_counter() - t0:.2f} s)")


@main.command()
@click.argument("file", type=click.Path(dir_okay=False))
@click.option("--out", "-o", type=click.Path(dir_okay=False), default=None,
              help="where to write the (n-1, 3) float64 edges (source, target, "
                   "weight) as .npy; nothing is written without it")
@click.option("--min-samples", "-k", default=1, show_default=True, type=int,
              help="HDBSCAN* k_pts, counting the point itself (1: plain Euclidean MST)")
@click.option("--backend", "-b", default="auto", show_default=True,
              type=click.Choice(["auto", "cpu", "cuda"]))
@click.option("--sort/--no-sort", default=False, show_default=True,
              help="order the edges by weight")
@click.option("--timings", is_flag=True, help="also print the seconds of every phase")
def run(file, out, min_samples, backend, sort, timings):
    """Compute the minimum spanning tree of the (n, d) array in FILE (.npy)."""
    from .api import emst
    from .kernels import cuda_available
    from .validation import InputError

    pts = _load(file)
    if backend == "cuda" and not cuda_available():
        raise InputProblem("--backend cuda needs CuPy and a visible GPU "
                           "(pip install 'emst-dask[cuda]'); use --backend cpu")
    t0 = time.perf_counter()
    try:
        tree = emst(pts, min_samples=min_samples, backend=backend, sort_by_weight=sort)
    except InputError as exc:
        raise InputProblem(f"{file}: {exc}") from None
    seconds = time.perf_counter() - t0
    n, d = tree.n_points, tree.n_dims
    rate = n * d / seconds / 1e6 if seconds > 0 else float("inf")
    click.echo(f"n={n} d={d} dtype={pts.dtype} min_samples={tree.min_samples} "
               f"backend={tree.backend}")
    click.echo(f"seconds={seconds:.3f} iterations={tree.iterations} "
               f"MFeatures/s={rate:.2f}")
    click.echo(f"edges={tree.n_edges} total_weight={tree.total_weight!r}")
    if timings:
        for phase, sec in tree.timings.items():
            click.echo(f"  {phase:<32s} {sec:9.3f} s")
    if out is not None:
        _save(out, tree.to_numpy())
        click.echo(f"wrote {out}")


def _load(path):
    import numpy as np

    if not os.path.exists(path):
        raise InputProblem(f"{path}: no such file")
    try:
        with open(path, "rb") as fh:
            magic = fh.read(6)
        if magic[:2] == b"PK":
            raise InputProblem(f"{path}: is an .npz archive; give one (n, d) array as .npy")
        if magic != b"\x93NUMPY":
            raise InputProblem(f"{path}: is not a .npy file (numpy.save format)")
        arr = np.load(path, allow_pickle=False)
    except ValueError as exc:  # object arrays, damaged headers
        raise InputProblem(f"{path}: cannot be read as a numeric .npy array ({exc})") from None
    except OSError as exc:
        raise InputProblem(f"{path}: cannot be read ({exc.strerror or exc})") from None
    return arr


def _save(path, arr):
    import numpy as np

    try:
        with open(path, "wb") as fh:
            np.save(fh, arr)
    except OSError as exc:
        raise InputProblem(f"cannot write {path}: {exc.strerror or exc}") from None


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
