"""The marks of what this package writes, and reading them: the format tags
of its stores, the names of its temporaries, the entries each kind of store
holds, the mark of its pictures.

The bottom of the output modules: ``output`` (checking and placing an
output), ``leftovers`` (removing what dead jobs left) and ``picture`` all
judge "did this package write it" by these, and this module imports none
of them.
"""
from __future__ import annotations

import json
import os
import re
import shutil

from ..errors import OutputError
from .owned import recorded

#: format tag of an edge store (a Zarr group attribute)
EDGE_FORMAT = "emst-dask edges 1"
#: infix of the temporary siblings of a local output
TMP_TAG = ".emst-tmp-"
#: the temporary tag of a replaced output set aside until the new one is in place
SET_ASIDE = "old-"
#: what ``generate`` marks its snapshots with (a Zarr group attribute)
SNAPSHOT_ATTR = "generator"
#: format tag of a cluster store (``emst_dask.io.cluster_store``)
CLUSTER_FORMAT = "emst-dask clusters 1"

# What a store written before it recorded its entries (``io.owned``) may
# hold, by kind: the arrays and groups, and the group attribute keys, that
# the package's writers set.
_EDGE_ENTRIES = re.compile(r"^(source|target|weight|core_distances)$")
_EDGE_KEYS = frozenset({
    "format", "format_version", "complete", "n", "d", "n_edges", "min_samples",
    "total_weight", "dtype", "input", "version", "backend", "iterations", "timings",
    "box_size", "created", "job", "sorted_by_weight", "partitioned"})
_CLUSTER_ENTRIES = re.compile(
    r"^(labels|probabilities|outlier_scores|persistence|condensed"
    r"|condensed/(parent|child|child_size|lambda_val)"
    r"|catalogue|catalogue/\d+|catalogue/\d+/(length|position|velocity"
    r"|GroupLen|GroupPos|GroupVel|GroupMass|GroupOffset|IDs))$")
_CLUSTER_KEYS = frozenset({
    "format", "complete", "version", "kind", "n", "d", "input", "job", "seconds",
    "n_clusters", "selected", "min_samples", "min_cluster_size", "cluster_selection_method",
    "allow_single_cluster", "cluster_selection_epsilon", "max_cluster_size",
    "linking_lengths", "linking_length", "linking_length_given", "relative", "box_size",
    "min_members", "n_groups", "single", "velocities", "ids", "masses"})
_SNAPSHOT_ENTRIES = re.compile(r"^points$")
_SNAPSHOT_KEYS = frozenset({SNAPSHOT_ATTR, "n", "d", "seed"})


def owned_names(attrs: dict, contents: str):
    """What of a store of ``contents`` ("edges", "points" or "clusters") with
    the group attributes ``attrs`` the package wrote: its record
    (``io.owned``), else the names its writers use.

    Returns
    -------
    owns : callable, entry path (str) -> bool
    own_key : callable, group attribute key (str) -> bool
    """
    rec = recorded(attrs)
    if rec is not None:
        entries, keys = rec
        return entries.__contains__, keys.__contains__
    names, keys = {"points": (_SNAPSHOT_ENTRIES, _SNAPSHOT_KEYS),
                   "clusters": (_CLUSTER_ENTRIES, _CLUSTER_KEYS)}.get(
                       contents, (_EDGE_ENTRIES, _EDGE_KEYS))
    return (lambda p: bool(names.match(p))), keys.__contains__


def remove(path: str):
    """Remove a file or directory tree we made; missing is fine."""
    try:
        if os.path.isdir(path) and not os.path.islink(path):
            shutil.rmtree(path, ignore_errors=True)
        else:
            os.remove(path)
    except FileNotFoundError:
        pass


def zarr_group_attrs(path: str) -> dict | None:
    """The attributes of the Zarr group at local ``path`` (v2 or v3), or None
    when it is not one.  Read from the metadata files, no zarr needed."""
    try:
        with open(os.path.join(path, "zarr.json"), encoding="utf-8") as fh:
            meta = json.load(fh)
        if meta.get("node_type") != "group":
            return None
        return dict(meta.get("attributes") or {})
    except FileNotFoundError:
        pass
    except (OSError, ValueError):
        return None
    if not os.path.exists(os.path.join(path, ".zgroup")):
        return None
    try:
        with open(os.path.join(path, ".zattrs"), encoding="utf-8") as fh:
            return dict(json.load(fh))
    except FileNotFoundError:
        return {}
    except (OSError, ValueError):
        return None


#: the formats drawn, by file suffix
FORMATS = ("png", "pdf", "svg")
#: the metadata value every picture drawn here carries
MARK = "emst-dask picture"
#: the metadata entry that carries it, by format
PICTURE_KEY = {"png": "Software", "pdf": "Creator", "svg": "Creator"}


def picture_format(path) -> str:
    """The format of ``path`` by its suffix; an OutputError for another."""
    fmt = os.path.splitext(os.fspath(path))[1].lower().lstrip(".")
    if fmt not in FORMATS:
        raise OutputError(f"cannot draw {path}: a picture is "
                          + ", ".join(f".{f}" for f in FORMATS[:-1]) + f" or .{FORMATS[-1]}")
    return fmt


def drawn_here(path) -> bool:
    """True when ``path`` is a picture that carries this package's mark."""
    try:
        with open(path, "rb") as fh:
            return MARK.encode() in fh.read()
    except OSError:
        return False
