"""Whether numba's on-disk cache already holds the CPU kernels of a cloud.

numba compiles every kernel once per signature (the axis loops are
unrolled per dimension) and keeps the machine code in its cache, beside the
package (or in ``NUMBA_CACHE_DIR``).  A first run of a (dtype, dimension)
spends a minute or two compiling before the tree build moves; this module
tells that case apart cheaply, by reading the index numba keeps for the
Borůvka search kernel (no compilation, no machine code loaded), so that the
first run can say what it is doing (``notice_if_cold``).
"""
from __future__ import annotations

import logging

import numpy as np

log = logging.getLogger("emst_dask")

#: the phase a cold cache reports through a job's progress callback
PHASE = "compile"
#: seconds a first run spends compiling one (dtype, dimension) on a 2-core
#: machine (measured: benchmarks/NOTES.md), said in the notice as minutes
COMPILE_MINUTES = "1-2"


def compiled(dtype, d: int) -> bool:
    """Whether the cache holds the Borůvka search kernel for ``dtype`` points
    in ``d`` dimensions, compiled for this machine and this source.

    Parameters
    ----------
    dtype : numpy dtype
        float32 or float64: the dtype the kernels run in.
    d : int
        Dimensions, 1 to 8.

    Returns
    -------
    bool
        False when numba would compile (no index, a stale index, no entry
        for this signature); True when it would load.
    """
    try:
        from numba.core.registry import cpu_target

        from .search import find_component_outgoing_edges as kernel

        index = kernel._cache._cache_file._load_index()  # {} when stale or absent
        magic = cpu_target.target_context.codegen().magic_tuple()
    except Exception:  # numba's internals moved: say nothing rather than guess
        log.debug("could not read numba's cache index", exc_info=True)
        return True
    name = np.dtype(dtype).name
    for sig, key_magic, *_ in index:
        text = str(sig)
        if (key_magic == magic and text.startswith(f"(Array({name}, 2,")
                and f"UniTuple(int64, {int(d)})" in text):
            return True
    return False


def notice(dtype, d: int) -> str:
    """What a first run of ``dtype`` points in ``d`` dimensions says while it compiles."""
    return (f"emst-dask: compiling the CPU kernels for {np.dtype(dtype).name} points in "
            f"{int(d)}-D, once: about {COMPILE_MINUTES} minutes on a few cores; later runs "
            f"load them from numba's cache. To do it ahead of time: emst-dask warm")


def notice_if_cold(dtype, d: int, progress=None) -> bool:
    """Say that the kernels are being compiled, when the cache does not hold them.

    Through ``progress(PHASE, message=..., dtype=..., d=...)`` when a
    progress callback follows the job (a worker's relays it to the
    client), else as a warning of the ``emst_dask`` logger (stderr unless
    logging is set up otherwise).  Returns whether the cache was cold.
    """
    if compiled(dtype, d):
        return False
    msg = notice(dtype, d)
    if progress:
        progress(PHASE, message=msg, dtype=np.dtype(dtype).name, d=int(d))
    else:
        log.warning(msg)
    return True
