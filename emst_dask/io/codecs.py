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

from .crc32c_codec import register as _register_crc32c

#: zstd level of the arrays written with ``codec="zstd"`` (snapshots, cluster
#: stores; fast, and coordinates compress little)
ZSTD_LEVEL = 3
#: the codec of edge stores' arrays: lz4 after a byte shuffle, whose encode
#: and decode run near memory speed (row ids and lengths compress little:
#: 2-5% on the clouds measured, whatever the codec; benchmarks/io_paths.py)
EDGE_CODEC = "lz4"

# the package's arrays checksummed with the GIL released (the same codec)
_register_crc32c()


def _crc32c():
    from zarr.registry import get_codec_class

    return get_codec_class("crc32c")()


def array_settings(zarr_format: int, codec: str = "zstd", itemsize: int = 8) -> dict:
    """Keyword arguments of ``zarr.Group.create_array`` for an array we write.

    Parameters
    ----------
    zarr_format : {2, 3}
    codec : {"zstd", "lz4"}
        zstd level ``ZSTD_LEVEL``, or lz4 after a byte shuffle (blosc).
    itemsize : int
        Bytes per element (the shuffle's stride).
    """
    if codec not in ("zstd", "lz4"):
        raise ValueError(f"codec must be 'zstd' or 'lz4', not {codec!r}")
    if int(zarr_format) == 3:
        from zarr.codecs import BloscCodec, ZstdCodec

        comp = (ZstdCodec(level=ZSTD_LEVEL) if codec == "zstd" else
                BloscCodec(cname="lz4", clevel=5, shuffle="shuffle", typesize=int(itemsize)))
        return dict(compressors=[comp, _crc32c()], config={"write_empty_chunks": True})
    import numcodecs

    comp = (numcodecs.Zstd(level=ZSTD_LEVEL) if codec == "zstd" else
            numcodecs.Blosc(cname="lz4", clevel=5, shuffle=numcodecs.Blosc.SHUFFLE))
    return dict(filters=[numcodecs.CRC32()], compressors=comp,
                config={"write_empty_chunks": True})


def create_array(group, name: str, shape, chunks, dtype, zarr_format: int,
                 codec: str = "zstd"):
    """A new array of ``group`` with the package's codecs (fill value 0)."""
    dtype = np.dtype(dtype)
    return group.create_array(name, shape=tuple(shape), chunks=tuple(chunks),
                              dtype=dtype, fill_value=0,
                              **array_settings(zarr_format, codec, dtype.itemsize))
