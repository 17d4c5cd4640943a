"""zarr's ``crc32c`` codec, computed with the GIL released.

zarr computes the CRC-32C of a chunk with ``google_crc32c``, which holds
the GIL: a process then checksums one chunk at a time, near 4 GB/s,
however many threads read or write.  This class is zarr's own codec (the
same name, the same four little-endian bytes after the data, so the stores
are the same) with the checksum from the ``crc32c`` package, which
releases the GIL; ``emst_dask.io.codecs`` registers it as zarr's
implementation of ``crc32c`` when that package is installed.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from zarr.codecs import Crc32cCodec as _ZarrCrc32c

try:
    from crc32c import crc32c as _crc
except ImportError:  # pragma: no cover - the package is a dependency
    _crc = None


def _value(data: np.ndarray) -> int:
    return _crc(data, gil_release_mode=1)


@dataclass(frozen=True)
class Crc32cCodec(_ZarrCrc32c):
    """The ``crc32c`` bytes-to-bytes codec of the Zarr v3 specification."""

    def _decode_sync(self, chunk_bytes, chunk_spec):
        data = chunk_bytes.as_numpy_array()
        inner = data[:-4]
        computed = np.uint32(_value(inner)).tobytes()
        stored = bytes(data[-4:])
        if computed != stored:
            raise ValueError("Stored and computed checksum do not match. "
                             f"Stored: {stored!r}. Computed: {computed!r}.")
        return chunk_spec.prototype.buffer.from_array_like(inner)

    def _encode_sync(self, chunk_bytes, chunk_spec):
        data = chunk_bytes.as_numpy_array()
        out = np.empty(data.nbytes + 4, np.uint8)
        out[:-4] = data.view(np.uint8).reshape(-1)
        out[-4:] = np.array([_value(data)], "<u4").view(np.uint8)
        return chunk_spec.prototype.buffer.from_array_like(out)


def register() -> bool:
    """Make this class zarr's ``crc32c`` implementation (unless the user
    configured one); False when the ``crc32c`` package is missing."""
    if _crc is None:
        return False
    import zarr
    from zarr.registry import register_codec

    key = "codecs.crc32c"
    current = zarr.config.get(key, None)
    if current not in (None, f"{_ZarrCrc32c.__module__}.{_ZarrCrc32c.__name__}",
                       "zarr.codecs.crc32c_.Crc32cCodec", "zarr.codecs.Crc32cCodec"):
        return False  # the user chose an implementation
    register_codec("crc32c", Crc32cCodec)
    zarr.config.set({key: f"{__name__}.Crc32cCodec"})
    return True
