"""The .npy files this package writes, and how it knows them again.

A .npy header cannot carry a tag (readers refuse keys beyond ``descr``,
``fortran_order`` and ``shape``), yet ``overwrite=True`` must replace only
files this package wrote: a user's particle ids are an int64 .npy like a
label array, and a 3-D float64 point cloud has an edge array's shape.  So
the package writes its .npy files with a header block of exactly
``HEADER_BYTES`` bytes, the dictionary padded with spaces, which every
.npy reader accepts (the data stay 64-byte aligned).  ``numpy.save`` pads
to the next multiple of 64 (and a few spaces for growth), so an array of a
plain dtype saved by anything else never has a header this long.
"""
from __future__ import annotations

import struct

import numpy as np

#: the header block (magic string to the newline) of every .npy written here
HEADER_BYTES = 512
_MAGIC = b"\x93NUMPY\x01\x00"
_CHUNK = 1 << 26  # bytes per write of a file object without a descriptor


def save(fh, array) -> None:
    """Write ``array`` to the binary file object ``fh`` in .npy format 1.0,
    its header padded to ``HEADER_BYTES``.

    Parameters
    ----------
    fh : binary file object, open for writing at its start.
    array : array_like of a plain (non-object, non-structured) dtype, any shape.
    """
    a = np.ascontiguousarray(array)
    if a.dtype.hasobject or a.dtype.names:
        raise TypeError(f"cannot write a {a.dtype} array as a marked .npy")
    header = {"descr": np.lib.format.dtype_to_descr(a.dtype), "fortran_order": False,
              "shape": tuple(int(s) for s in a.shape)}
    text = "{" + "".join(f"{k!r}: {v!r}, " for k, v in sorted(header.items())) + "}"
    room = HEADER_BYTES - len(_MAGIC) - 2 - len(text) - 1
    if room < 0:  # pragma: no cover - a shape of dozens of dimensions
        raise ValueError(f"a {a.ndim}-dimensional array does not fit a marked .npy header")
    fh.write(_MAGIC + struct.pack("<H", HEADER_BYTES - len(_MAGIC) - 2))
    fh.write((text + " " * room + "\n").encode("latin1"))
    data = memoryview(a.reshape(-1).view(np.uint8))
    for i in range(0, len(data), _CHUNK):
        fh.write(data[i:i + _CHUNK])


def written_here(path) -> bool:
    """True when ``path`` is a .npy file with this package's header block."""
    try:
        with open(path, "rb") as fh:
            head = fh.read(len(_MAGIC) + 2)
    except OSError:
        return False
    return (len(head) == len(_MAGIC) + 2 and head[:len(_MAGIC)] == _MAGIC
            and struct.unpack("<H", head[len(_MAGIC):])[0] == HEADER_BYTES - len(_MAGIC) - 2)


__all__ = ["HEADER_BYTES", "save", "written_here"]
