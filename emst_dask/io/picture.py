"""Pictures (.png, .pdf, .svg): checked before any work, drawn whole or not
at all, never over a file this package did not draw.

A picture is an output like an edge store: ``resolve_picture`` refuses,
before the work, a format matplotlib is not asked for here, a missing or
unwritable directory, and an existing file unless ``overwrite`` and the
file carries this package's mark (``MARK`` in the picture's metadata:
PNG ``Software``, PDF and SVG ``Creator``); ``save`` draws it to a hidden
sibling and moves it into place.
"""
from __future__ import annotations

import os

from ..errors import OutputError
from .marks import FORMATS, MARK, PICTURE_KEY, drawn_here, picture_format
from .output import Output, resolve_output


def resolve_picture(path, overwrite: bool = False, source_location=None):
    """The checked ``io.output.Output`` of a picture (an Output passes
    through, checked again).

    Parameters
    ----------
    path : str, os.PathLike or Output
    overwrite : bool
        Replace a picture this package drew.
    source_location : str or sequence of str, optional
        The inputs drawn: the picture may not be one, hold one or lie
        inside one (``io.output.check_apart``).
    """
    if isinstance(path, Output):
        return path.check(source_location)
    if not isinstance(path, (str, os.PathLike)) or "://" in os.fspath(path):
        raise OutputError(f"cannot draw {path}: pictures are written to local files")
    picture_format(path)
    return resolve_output(path, overwrite=overwrite, contents="picture",
                          source_location=source_location)


def save(fig, output, dpi: int = 130) -> str:
    """Draw the matplotlib Figure ``fig`` to ``output`` (a path or Output,
    checked again now), whole or not at all; its path."""
    output = resolve_picture(output)
    fmt = picture_format(output.local)
    with output.written_aside() as tmp:
        fig.savefig(tmp, format=fmt, dpi=dpi, metadata={PICTURE_KEY[fmt]: MARK})
    return output.local


__all__ = ["FORMATS", "MARK", "drawn_here", "picture_format", "resolve_picture", "save"]
