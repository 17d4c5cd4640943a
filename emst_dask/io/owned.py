"""What inside a Zarr store the package wrote, and what someone else added.

Replacing an output (``overwrite``) removes the whole store, so it may
replace only a store that holds nothing but the package's own entries.
Every store the package writes (edge stores, cluster stores, friends-of-
friends catalogues, generated snapshots) records, when it is complete, the
group attribute ``WRITTEN_ATTR``: ``{"entries": [...], "attributes": [...]}``,
every array and group it wrote (paths relative to the store, "/"
separated) and every group attribute key it set.  A store written before
that record existed, or one whose job died before finishing, is judged by
the names the package writes for its kind (``marks.owned_names``).

Foreign content, reported by ``foreign_content``:

* a file or directory (also a symbolic link) that is not the metadata of
  an owned group, an owned array or group, the metadata of an owned array,
  or one of its chunks (names of digits: ``c/0/1``, ``0.1``, ``0/1``);
* an owned name that is not a Zarr node on disk;
* a group attribute key the package did not set.

Attributes of the arrays themselves are not judged (the package sets none,
and zarr keeps them in the array's own metadata file).
"""
from __future__ import annotations

import os
import re

#: the group attribute recording what the package wrote
WRITTEN_ATTR = "emst_dask_written"
#: metadata files of a group (v3, v2)
GROUP_META = frozenset({"zarr.json", ".zgroup", ".zattrs"})
#: metadata files of an array (v3, v2)
ARRAY_META = frozenset({"zarr.json", ".zarray", ".zattrs"})
_CHUNK_FILE = re.compile(r"^\d+(\.\d+)*$")
_DIGITS = re.compile(r"^\d+$")


def record_written(group, attrs: dict) -> dict:
    """``attrs`` with ``WRITTEN_ATTR`` added: every member of the zarr
    ``group`` (recursively) and every attribute key the group will hold once
    ``attrs`` and ``complete`` are set.  Call when the store is filled, and
    set the result as the group's attributes."""
    entries = sorted(name for name, _ in group.members(max_depth=None))
    keys = set(group.attrs) | set(attrs) | {"complete"}
    keys.discard(WRITTEN_ATTR)
    return dict(attrs, **{WRITTEN_ATTR: {"entries": entries, "attributes": sorted(keys)}})


def recorded(attrs: dict):
    """(entries, attribute keys) the store records, or None."""
    rec = attrs.get(WRITTEN_ATTR)
    if not isinstance(rec, dict):
        return None
    entries, keys = rec.get("entries"), rec.get("attributes")
    if not isinstance(entries, list) or not isinstance(keys, list):
        return None
    return {str(e) for e in entries}, {str(k) for k in keys}


def _node_kind(path: str) -> str | None:
    """"array", "group" or None for the local directory ``path``."""
    import json

    try:
        with open(os.path.join(path, "zarr.json"), encoding="utf-8") as fh:
            kind = json.load(fh).get("node_type")
        return kind if kind in ("array", "group") else None
    except FileNotFoundError:
        pass
    except (OSError, ValueError, AttributeError):
        return None
    if os.path.isfile(os.path.join(path, ".zarray")):
        return "array"
    if os.path.isfile(os.path.join(path, ".zgroup")):
        return "group"
    return None


def _plain(path: str, is_dir: bool) -> bool:
    """A plain file or directory (no symbolic link) of that kind."""
    if os.path.islink(path):
        return False
    return os.path.isdir(path) if is_dir else os.path.isfile(path)


def _shown(rel: str, full: str) -> str:
    return rel + "/" if os.path.isdir(full) and not os.path.islink(full) else rel


def foreign_content(root: str, owns, attrs: dict, own_keys) -> list:
    """What in the local Zarr group ``root`` the package did not write.

    Parameters
    ----------
    root : str
        The store's directory.
    owns : callable(str) -> bool
        True for the relative path of an array or group the package wrote.
    attrs : dict
        The group's attributes.
    own_keys : callable(str) -> bool
        True for an attribute key the package set.

    Returns
    -------
    list of str
        Relative paths (directories end in "/") and ``attribute KEY``
        entries, sorted; empty when the store holds only its own.
    """
    found = []

    def chunk_tree(rel, full):
        # every entry below a chunk directory is a directory or file of digits
        for name in sorted(os.listdir(full)):
            p, f = f"{rel}/{name}", os.path.join(full, name)
            if os.path.islink(f) or not _DIGITS.match(name):
                found.append(_shown(p, f))
            elif os.path.isdir(f):
                chunk_tree(p, f)
            elif not os.path.isfile(f):
                found.append(p)

    def array(rel, full):
        for name in sorted(os.listdir(full)):
            p, f = f"{rel}/{name}", os.path.join(full, name)
            if name in ARRAY_META and _plain(f, False):
                continue
            if _plain(f, False) and _CHUNK_FILE.match(name):
                continue
            if _plain(f, True) and (name == "c" or _DIGITS.match(name)):
                chunk_tree(p, f)
                continue
            found.append(_shown(p, f))

    def group(rel, full):
        for name in sorted(os.listdir(full)):
            p = f"{rel}/{name}" if rel else name
            f = os.path.join(full, name)
            if name in GROUP_META and _plain(f, False):
                continue
            if owns(p) and _plain(f, True):
                kind = _node_kind(f)
                if kind == "array":
                    array(p, f)
                    continue
                if kind == "group":
                    group(p, f)
                    continue
            found.append(_shown(p, f))

    try:
        group("", root)
    except OSError as exc:  # unreadable: nothing is provably the package's
        found.append(f"(unreadable: {exc.strerror or exc})")
    found += [f"attribute {k}" for k in sorted(attrs) if k != WRITTEN_ATTR and not own_keys(k)]
    return found


def describe_foreign(found: list, limit: int = 8) -> str:
    """``found`` as a short phrase for a message."""
    shown = ", ".join(found[:limit])
    if len(found) > limit:
        shown += f", ... ({len(found) - limit} more)"
    return f"holds what emst-dask did not write ({shown}): move it out or remove it yourself " \
        "to replace the store"


__all__ = ["WRITTEN_ATTR", "describe_foreign", "foreign_content", "record_written",
           "recorded"]
