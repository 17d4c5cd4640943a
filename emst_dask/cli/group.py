"""The ``emst-dask`` command group and the parameter types its commands share.

The command modules (``run``, ``tools``, ``products``, ``fof``, ``stats``)
register their commands on ``main`` here; the package imports them all, so
``emst_dask.cli.main`` is the whole command.
"""
from __future__ import annotations

import click

from .._version import __version__
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
