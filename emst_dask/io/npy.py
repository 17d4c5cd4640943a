"""The .npy files this package writes, and how it knows them again.

A .npy header cannot carry a tag (readers refuse keys beyond ``descr``,
``fortran_order`` and ``shape``), yet ``overwrite=True`` must replace only
files this package wrote: a user's particle ids are an int64 .npy like a
label array, and a 3-D float64 point cloud has an edge array's shape.  So
the package writes its .npy files with a header block of exactly
``HEADER_BYTES[kind]`` bytes, the dictionary padded with spaces, which
every .npy reader accepts (the data stay 64-byte aligned).  ``numpy.save``
pads to the next multiple of 64 (and a few spaces for growth), so an array
of a plain dtype saved by anything else never has a header this long.  The
length also says what the file holds, so that an edge array is never taken
for a point cloud ``generate`` may replace (files of version 0.2.0 carry
the edges' length whatever they hold).
"""
from __future__ import annotations

import struct

import numpy as np

#: the header block's length (magic string to the newline) by what the file holds
HEADER_BYTES = {"edges": 512, "points": 576, "clusters": 640, "linkage": 704}
_MAGIC = b"\x93NUMPY\x01\x00"
_CHUNK = 1 << 26  # bytes per write of a file object without a descriptor


def save(fh, array, kind: str) -> None:
    """Write ``array`` to the binary file object ``fh`` in .npy format 1.0,
    its header padded to ``HEADER_BYTES[kind]``.

    Parameters
    ----------
    fh : binary file object, open for writing at its start.
    array : array_like of a plain (non-object, non-structured) dtype, any shape.
    kind : {"edges", "points", "clusters", "linkage"}
        What the array is.
    """
    size = HEADER_BYTES[kind]
    a = np.ascontiguousarray(array)
    if a.dtype.hasobject or a.dtype.names:
        raise TypeError(f"cannot write a {a.dtype} array as a marked .npy")
    header = {"descr": np.lib.format.dtype_to_descr(a.dtype), "fortran_order": False,
              "shape": tuple(int(s) for s in a.shape)}
    text = "{" + "".join(f"{k!r}: {v!r}, " for k, v in sorted(header.items())) + "}"
    room = size - len(_MAGIC) - 2 - len(text) - 1
    if room < 0:  # pragma: no cover - a shape of dozens of dimensions
        raise ValueError(f"a {a.ndim}-dimensional array does not fit a marked .npy header")
    fh.write(_MAGIC + struct.pack("<H", size - len(_MAGIC) - 2))
    fh.write((text + " " * room + "\n").encode("latin1"))
    data = memoryview(a.reshape(-1).view(np.uint8))
    for i in range(0, len(data), _CHUNK):
        fh.write(data[i:i + _CHUNK])


def written_here(path) -> str | None:
    """What ``path`` holds if it is a .npy file with one of this package's
    header blocks (a key of ``HEADER_BYTES``), else None."""
    try:
        with open(path, "rb") as fh:
            head = fh.read(len(_MAGIC) + 2)
    except OSError:
        return None
    if len(head) != len(_MAGIC) + 2 or head[:len(_MAGIC)] != _MAGIC:
        return None
    size = struct.unpack("<H", head[len(_MAGIC):])[0] + len(_MAGIC) + 2
    return next((k for k, v in HEADER_BYTES.items() if v == size), None)


__all__ = ["HEADER_BYTES", "save", "written_here"]
