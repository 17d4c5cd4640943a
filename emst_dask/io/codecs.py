"""How this package stores arrays: compressed, with a checksum per chunk.

Every array the package writes (edge stores, ``generate``'s snapshots)
carries a CRC-32C checksum after compression (zarr_format 3) or a CRC-32
filter before it (zarr_format 2), so that a chunk damaged on disk is an
error when it is read, never a silently wrong value; and writes every
chunk, even one equal to the fill value, so that a missing chunk file is
always an error (``emst_dask.io.zarr_source``).
"""
from __future__ import annotations

import numpy as np

#: zstd level of every array written (fast; edges and coordinates compress little)
ZSTD_LEVEL = 3


def array_settings(zarr_format: int) -> dict:
    """Keyword arguments of ``zarr.Group.create_array`` for an array we write."""
    if int(zarr_format) == 3:
        from zarr.codecs import Crc32cCodec, ZstdCodec

        return dict(compressors=[ZstdCodec(level=ZSTD_LEVEL), Crc32cCodec()],
                    config={"write_empty_chunks": True})
    import numcodecs

    return dict(filters=[numcodecs.CRC32()], compressors=numcodecs.Zstd(level=ZSTD_LEVEL),
                config={"write_empty_chunks": True})


def create_array(group, name: str, shape, chunks, dtype, zarr_format: int):
    """A new array of ``group`` with the package's codecs (fill value 0)."""
    return group.create_array(name, shape=tuple(shape), chunks=tuple(chunks),
                              dtype=np.dtype(dtype), fill_value=0,
                              **array_settings(zarr_format))
