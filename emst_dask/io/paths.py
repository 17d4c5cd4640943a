"""Locations: local paths, URLs, and how two of them relate."""
from __future__ import annotations

import os


def is_pathlike(obj) -> bool:
    """A str or os.PathLike (a path or URL), not a store object."""
    return isinstance(obj, (str, os.PathLike))


def is_url(path) -> bool:
    """A URL other than file://."""
    return isinstance(path, str) and "://" in path and not path.startswith("file://")


def local_path(path) -> str | None:
    """The absolute, normalised local path of ``path`` (str, os.PathLike,
    file:// URL), or None for remote URLs and store objects."""
    if isinstance(path, os.PathLike):
        path = os.fspath(path)
    if not isinstance(path, str):
        return None
    if path.startswith("file://"):
        path = path[len("file://"):]
    elif "://" in path:
        return None
    return os.path.abspath(os.path.expanduser(path))


def real(path: str) -> str:
    """``path`` with symbolic links resolved (the path need not exist)."""
    return os.path.realpath(path)


def contains(outer: str, inner: str) -> bool:
    """True when local path ``inner`` is ``outer`` or lies inside it
    (symbolic links resolved)."""
    a, b = real(outer), real(inner)
    return b == a or b.startswith(a.rstrip(os.sep) + os.sep)


def _zarr_node(path: str) -> bool:
    """A local directory holding Zarr metadata (v3 or v2)."""
    return any(os.path.isfile(os.path.join(path, f)) for f in ("zarr.json", ".zgroup", ".zarray"))


def input_root(path: str) -> str:
    """The outermost Zarr store holding local ``path`` (an array or group of
    a snapshot: writing anywhere in the store changes the input), else
    ``path`` itself."""
    root = os.path.abspath(path)
    parent = os.path.dirname(root)
    while parent != root and _zarr_node(parent):
        root, parent = parent, os.path.dirname(parent)
    return root


def locations(*inputs) -> list:
    """The absolute local paths of those ``inputs`` that are local paths
    (None, URLs and objects are skipped): what outputs are kept apart from."""
    return [loc for loc in (local_path(i) if is_pathlike(i) else None for i in inputs)
            if loc is not None]
