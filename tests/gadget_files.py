"""Gadget-style HDF5 snapshots written with h5py, for the tests."""
from __future__ import annotations

import os

import numpy as np


def write_gadget(path, pos, *, box=1.0, vel=None, ids=None, masses=None, files=1, ptype=1,
                 chunks=None, others=None, header_extra=None):
    """Write ``pos`` (n, 3) as particle type ``ptype`` of a Gadget-2/4 style
    snapshot: ``path`` (``snap.hdf5``) for one file, else ``path`` is the stem
    and the files are ``stem.0.hdf5`` ... ``stem.{files-1}.hdf5`` (rows split
    in order).  ``others``: {type: (m, 3) positions} of further types.
    Returns the list of files."""
    import h5py

    others = dict(others or {})
    types = {ptype: (pos, vel, ids, masses)}
    for t, p in others.items():
        types[t] = (p, None, np.arange(len(p), dtype=np.uint64) + 10**9, None)
    cuts = {t: np.linspace(0, len(v[0]), files + 1).astype(int) for t, v in types.items()}
    total = np.zeros(6, np.uint64)
    for t, v in types.items():
        total[t] = len(v[0])
    paths = []
    for k in range(files):
        p = path if files == 1 else f"{path}.{k}.hdf5"
        paths.append(p)
        with h5py.File(p, "w") as f:
            h = f.create_group("Header")
            this = np.zeros(6, np.int32)
            for t in types:
                this[t] = cuts[t][k + 1] - cuts[t][k]
            h.attrs["NumPart_ThisFile"] = this
            h.attrs["NumPart_Total"] = (total & 0xFFFFFFFF).astype(np.uint32)
            h.attrs["NumPart_Total_HighWord"] = (total >> 32).astype(np.uint32)
            h.attrs["NumFilesPerSnapshot"] = np.int32(files)
            h.attrs["BoxSize"] = np.float64(box) if np.ndim(box) == 0 else np.asarray(box)
            h.attrs["MassTable"] = np.zeros(6)
            h.attrs["Redshift"] = 0.0
            for key, value in (header_extra or {}).get(k, {}).items():
                h.attrs[key] = value
            for t, (p_, v_, i_, m_) in types.items():
                a, b = cuts[t][k], cuts[t][k + 1]
                g = f.create_group(f"PartType{t}")
                kw = {} if chunks is None else {"chunks": (min(chunks, max(b - a, 1)), 3)}
                g.create_dataset("Coordinates", data=p_[a:b], **kw)
                if v_ is not None:
                    g.create_dataset("Velocities", data=v_[a:b])
                if i_ is not None:
                    g.create_dataset("ParticleIDs", data=i_[a:b])
                if m_ is not None:
                    g.create_dataset("Masses", data=m_[a:b])
    return paths


def truncate(path, keep=0.5):
    """Cut the file to a fraction of its size (a copy that stopped short)."""
    size = os.path.getsize(path)
    with open(path, "r+b") as fh:
        fh.truncate(int(size * keep))
