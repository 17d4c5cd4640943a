"""Temporaries that dead jobs left behind, and removing them safely.

A job writes each output to a hidden sibling ``.NAME.emst-tmp-<job>-<tag>``
and its end removes them (``output.Output.cleanup``).  A scheduler or
client killed while the job writes never gets there: the temporary -- a
partitioned job's ``...-shared`` store can be large -- stays.
``find_leftovers`` lists them in one directory and ``clean`` removes those
that are provably the package's own and stale:

* the name has the temporary's form (``TMP_NAME``), and
* what it holds carries the package's mark: a Zarr group with the format
  tag of an edge or cluster store, or a snapshot's ``generator`` attribute,
  holding only the arrays such a store has (``io.owned``); or a .npy file
  with one of the package's header blocks (``io.npy``), or a picture
  with its mark (``io.picture``); and
* nothing in it changed for ``min_age`` seconds (a job still writing it
  touches it).

A former output set aside while being replaced (tag ``old-...``) is the
user's: it is never removed, only reported with how to put it back.
Anything else carrying the name is reported and kept.
"""
from __future__ import annotations

import os
import re
import time
from dataclasses import dataclass

from . import npy
from .marks import (CLUSTER_FORMAT, EDGE_FORMAT, SET_ASIDE, SNAPSHOT_ATTR, TMP_TAG, drawn_here,
                    owned_names, remove, zarr_group_attrs)
from .owned import foreign_content

#: the name of a temporary sibling: ``.NAME.emst-tmp-<8 hex>-<tag>``
TMP_NAME = re.compile(r"^\.(?P<base>.+)" + re.escape(TMP_TAG)
                      + r"(?P<token>[0-9a-f]{8})-(?P<tag>.+)$")
#: how long a temporary must have been left alone before ``clean`` removes it
DEFAULT_MIN_AGE = 24 * 3600.0


@dataclass
class Leftover:
    """One temporary found beside an output.

    Attributes
    ----------
    path : str, the temporary.
    output : str, the output it was written for.
    token : str, the job's token.
    age : float, seconds since anything in it last changed.
    ours : bool, it carries the package's mark (see the module docstring).
    set_aside : bool, a former output set aside while being replaced.
    """

    path: str
    output: str
    token: str
    age: float
    ours: bool
    set_aside: bool


def _age(path: str, now: float) -> float:
    """Seconds since ``path`` or anything inside it last changed."""
    newest = os.lstat(path).st_mtime
    if os.path.isdir(path) and not os.path.islink(path):
        for root, dirs, files in os.walk(path):
            for name in dirs + files:
                try:
                    newest = max(newest, os.lstat(os.path.join(root, name)).st_mtime)
                except OSError:
                    pass
    return max(0.0, now - newest)


def carries_mark(path: str) -> bool:
    """True when the temporary ``path`` is provably something the package
    began writing (see the module docstring)."""
    if os.path.islink(path):
        return False
    if os.path.isdir(path):
        attrs = zarr_group_attrs(path)
        if attrs is None:
            return False
        fmt = attrs.get("format")
        contents = "clusters" if fmt == CLUSTER_FORMAT else "edges" if fmt == EDGE_FORMAT \
            else "points" if SNAPSHOT_ATTR in attrs else None
        if contents is None:
            return False
        # the kind's mark, and only the entries and attributes such a store
        # has (what ``output.Output.why_not_replaceable`` asks of a store)
        owns, own_key = owned_names(attrs, contents)
        return not foreign_content(path, owns, attrs, own_key)
    if not os.path.isfile(path):
        return False
    if npy.written_here(path) is not None:
        return True
    return drawn_here(path)


def find_leftovers(directory, now: float | None = None, output_base: str | None = None) -> list:
    """Every temporary sibling in ``directory`` (not recursive), oldest first
    (only those of the output named ``output_base``, if given).

    Returns
    -------
    list of Leftover
    """
    directory = os.path.abspath(os.fspath(directory))
    now = time.time() if now is None else now
    found = []
    for name in sorted(os.listdir(directory)):
        m = TMP_NAME.match(name)
        if m is None or (output_base is not None and m["base"] != output_base):
            continue
        path = os.path.join(directory, name)
        try:
            age = _age(path, now)
        except OSError:  # removed meanwhile (its job ended)
            continue
        aside = m["tag"].startswith(SET_ASIDE)
        found.append(Leftover(path, os.path.join(directory, m["base"]), m["token"], age,
                              False if aside else carries_mark(path), aside))
    return sorted(found, key=lambda t: -t.age)


def stale_after() -> float:
    """Seconds after which a marked temporary nobody touched is a dead
    job's: ``dask.config`` ``emst.temporaries.stale-after`` (default 24 h)."""
    import dask.config
    from dask.utils import parse_timedelta

    return float(parse_timedelta(dask.config.get("emst.temporaries.stale-after", "24h")))


def clean(directory, min_age: float = DEFAULT_MIN_AGE, dry_run: bool = False, *,
          output_base: str | None = None, skip_token: str | None = None):
    """Remove the stale temporaries of dead jobs in ``directory``.

    Parameters
    ----------
    directory : path
    min_age : float
        Seconds a temporary must have been left alone (nothing in it
        changed) to be removed; a job still writing one touches it.
    dry_run : bool
        Only say what would be removed.
    output_base : str, optional
        Only the temporaries of the output of this name.
    skip_token : str, optional
        Never those of this job.

    Returns
    -------
    removed : list of Leftover
        Removed (or, with ``dry_run``, to be removed).
    kept : list of (Leftover, str)
        Kept, with why.
    """
    if min_age < 0:
        raise ValueError(f"min_age must be >= 0, got {min_age!r}")
    removed, kept = [], []
    for t in find_leftovers(directory, output_base=output_base):
        if t.token == skip_token:
            continue
        if t.set_aside:
            why = ("the former output, set aside while a job replaced it: "
                   + (f"move it back (mv '{t.path}' '{t.output}')"
                      if not os.path.lexists(t.output) else
                      "the new output is in place; remove it yourself once you do not "
                      "need it"))
            kept.append((t, why))
        elif not t.ours:
            kept.append((t, "not provably written by emst-dask (no mark of the package, or "
                            "it holds something else)"))
        elif t.age < min_age:
            kept.append((t, f"changed {t.age / 3600:.2g} h ago: a job may still write it"))
        else:
            if not dry_run:
                remove(t.path)
            removed.append(t)
    return removed, kept


__all__ = ["DEFAULT_MIN_AGE", "Leftover", "TMP_NAME", "carries_mark", "clean",
           "find_leftovers", "stale_after"]
