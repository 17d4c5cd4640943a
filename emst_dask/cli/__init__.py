"""Layer 4, the ``emst-dask`` command (click).

    emst-dask generate NAME N --out FILE.npy|SNAPSHOT.zarr [--dim D] [--seed S]
    emst-dask run SOURCE [--out EDGES.npy|EDGES.zarr] [--scheduler ADDRESS | --scheduler-file FILE]
    emst-dask job NAME --scheduler-file FILE [--wait]
    emst-dask info EDGES
    emst-dask plot EDGES --points SOURCE --out mst.png
    emst-dask demo [--dir DIR] [--n N]
    emst-dask hdbscan SOURCE --min-cluster-size M [--min-samples K] --out LABELS
    emst-dask cut EDGES --linking-length B [-b B ...] --out LABELS
    emst-dask linkage EDGES --out Z.npy
    emst-dask plot-clusters LABELS --points SOURCE --out clusters.png
    emst-dask fof SOURCE [-b B ...] [--box-size L|snapshot] [--velocities NAME] --out HALOS.zarr
    emst-dask stats EDGES --points SOURCE [--box-size L] [--plot stats.png] [--out STATS.npz]
    emst-dask clean DIRECTORY [--older-than HOURS] [--dry-run]

Commands call the API and the service; ``errors`` turns what they raise
into ``Error:`` lines.
"""
from __future__ import annotations

import sys

import click

from .. import __version__
from .errors import Main


class Count(click.ParamType):
    """A count (of points, rows) >= ``minimum``: ``1000000``, ``1_000_000`` or ``1e6``."""

    name = "N"

    def __init__(self, minimum: int = 0):
        self.minimum = minimum

    def convert(self, value, param, ctx):
        """``value`` (an int, or text such as ``1_000_000`` or ``1e6``) as an int >= 0, or fail."""
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
        if n < self.minimum:
            self.fail(f"must be >= {self.minimum}, got {n}", param, ctx)
        return n


@click.group(cls=Main, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="emst-dask")
def main():
    """Exact Euclidean minimum spanning trees (single-tree Borůvka)."""


from . import fof as _fof  # noqa: E402,F401
from . import products as _products  # noqa: E402,F401
from . import run as _run  # noqa: E402,F401  (registers the commands)
from . import stats as _stats  # noqa: E402,F401
from . import tools as _tools  # noqa: E402,F401

if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
