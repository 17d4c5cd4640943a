"""``emst_dask.fof``: friends-of-friends halos of a cloud, here or on a cluster.

The entry point above both places the work can run: in this process
(``fof_here``: the tree by ``emst``, then the catalogue of
``emst_dask.products.fof``) or on a Dask cluster
(``emst_dask.distributed.fof.fof_service``, which reads the source on the
workers).  The algorithm and the catalogue are in ``products.fof``.
"""
from __future__ import annotations

import time

import numpy as np

from .errors import InputError
from .products.catalogue import check_catalogue_output
from .products.fof import catalogue_of_tree, check_tree, load_tree
from .products.fof_checks import (absolute_lengths, check_box_size, check_in_box,
                                  check_linking_lengths, check_min_members, check_stated_box,
                                  check_velocities, read_ids_masses)
from .products.tree_checks import check_weights_of


def spanning_tree_in_box(points, box, backend, progress=None):
    """The Euclidean tree here: ``emst(points, box_size=box)`` (periodic when
    ``box`` is not None)."""
    from .api import emst

    return emst(points, backend=backend, box_size=box, progress=progress)


def fof(source, linking_length=0.2, relative=True, box_size=None, min_members=20,
        velocities=None, *, ids=None, masses=None, backend="auto", client=None, out=None,
        overwrite=False, columns=None, array=None, tree=None, progress=None,
        **service_options):
    """Friends-of-friends halos: labels and a catalogue per group.

    The groups at linking length b are the connected components of the
    graph that links every two points at distance <= b (minimum-image
    distance in a periodic box), computed exactly from the minimum spanning
    tree: the components of its edges of weight <= b.

    Parameters
    ----------
    source : (n, d) array (numpy or cupy), or any source ``emst_dask.emst``
        takes: a .npy or Zarr path or URL, a zarr array or group (an N-body
        snapshot: a group with an (n, d) ``Position`` array, say, picked
        with ``array=``; a group holding one (n, d) array besides the
        velocities needs no ``array=``), a dask array.
    linking_length : float, or a sequence of K floats, default 0.2
        b, each finite and > 0.  A sequence gives K sets of labels and K
        catalogues from one tree.
    relative : bool, default True
        b in units of the mean separation (V / n)^(1/d): V the volume of the
        box, or, without a box, of the points' bounding box (a bounding box
        of zero extent along an axis, all points on a plane, is refused).
        False: b in the points' units.
    box_size : None, float, (d,) floats, or "snapshot"
        The periodic box [0, L) per axis: distances are minimum-image, and
        the groups cross the faces.  Points must lie in [0, L) (a row
        outside is refused, named), and b < L/2 on every axis.  "snapshot":
        the ``BoxSize`` attribute of the Zarr group ``source`` or of its
        ``Header`` group, or the ``Header/BoxSize`` of an HDF5 snapshot (a
        number or d numbers).  None: no box; refused for a snapshot that
        has a ``BoxSize`` (its groups would be cut at the faces): "open"
        asks for groups in open space there.
    min_members : int >= 1, default 20
        Groups of fewer points get label -1 and no catalogue row.
    velocities : (n, d) array, the name of an array of the Zarr group
        ``source`` (e.g. "Velocity"), or None
        Gives each group's mean velocity.  Of an HDF5 snapshot: a dataset
        of the positions' particle type ("Velocities").
    ids : (n,) integer array, the name of an array of the snapshot (e.g.
        "ParticleIDs"), or None
        Particle IDs: the catalogue lists the members' IDs group by group
        (``ids``, with each group's ``offset``: Gadget's ``IDs`` and
        ``GroupOffset``).
    masses : (n,) array, the name of an array of the snapshot ("Masses"), or None
        Particle masses (finite, >= 0): the centres and velocities are
        mass-weighted, and each group gets its ``mass`` (``GroupMass``).
    backend : {"auto", "cpu", "cuda"}
        Of the tree and the catalogue.
    client : as for ``emst_dask.emst``
        None: in-memory points here; other sources on the default Client or
        an embedded cluster, where the tree and the catalogue are computed
        on one worker (the points never come back).  False: here.
    out : path, URL or zarr store, optional
        Write the labels and catalogue there, a Zarr group, complete or
        absent (``emst_dask.products.catalogue``); a ``FoFStore`` handle is
        returned.  Checked before any work.
    overwrite : bool
        Replace a cluster store this package wrote (nothing else).
    columns, array : select the coordinates of a Zarr group (as ``emst``).
    tree : SpanningTree, EdgeStore or edge store path, optional
        The Euclidean tree of these points (computed with the same
        ``box_size``): no tree is computed.  Computed in this process.
    progress : bool or callable, optional
        True for a bar, or ``progress(phase, **info)``.
    **service_options
        ``name``, ``storage_options``, ``out_storage_options``, ``zarr_format``, ``threads``, ``timeout``.

    Returns
    -------
    FoFCatalogue
        ``labels`` (n,) int64, or (K, n) for a sequence; -1 for points in
        no group of at least ``min_members``; groups numbered 0, 1, ... by
        decreasing member count, ties by their smallest row.
        ``linking_length`` (K,) the absolute lengths; per length ``length``
        (G,) int64, ``position`` (G, d) float64 centre of mass,
        ``velocity`` (G, d) float64 or None (lists of K arrays for a
        sequence).
    FoFStore
        With ``out=``.

    Raises
    ------
    InputError
        Before any work: a linking length <= 0, NaN or inf; relative=True
        with no volume to take; a box length <= 0 or a wrong count; a point
        outside [0, L) (its row); velocities of the wrong shape;
        min_members < 1; b >= L/2; a tree of other points or another box.

    Notes
    -----
    The centre of mass of a group that crosses a face: its members are
    moved by whole box lengths so that the group is one piece, following
    the tree's edges (each shorter than b < L/2, so the neighbour along an
    edge is the nearest image); their mean is wrapped back into [0, L).
    This is exact for a group of any extent below the box.  A group that
    percolates (joins its own image across the box) has no centre of mass;
    it gets the mean along its tree, which is well defined but arbitrary.

    Differences from nbodykit's ``FOF(source, linking_length, nmin,
    absolute=False)`` and ``find_features()``:

    - labels: -1 for points in no group and groups from 0, where nbodykit
      uses 0 for them and numbers groups from 1 (its catalogue's row 0 is a
      placeholder);
    - ``min_members`` keeps groups of at least that many points; nbodykit
      drops groups of ``nmin`` points or fewer (its test is ``N <= nmin``);
    - ties in size are broken by the smallest row, so the labels are
      deterministic; nbodykit's order of equal sizes is its sort's;
    - points at distance exactly b are linked (<= b, as scipy's
      ``cKDTree.query_pairs``);
    - without a box, the relative length takes the bounding box's volume;
      nbodykit always takes ``BoxSize``; and d may be 1 to 8
      (nbodykit: (V / n)^(1/3) in 3-D);
    - the centre of mass unwraps along the group's tree edges; nbodykit
      moves each member to its image nearest the group's per-axis minimum,
      which is right for groups narrower than half the box;
    - positions and velocities are float64 (nbodykit: float32), and the
      tree is exact: the groups are those of the radius graph, with no
      approximation (for float32 points, of their distances computed in
      float32: a pair within float32's rounding of b, about 1e-7
      relative, may fall on the other side of b than a float64 computation
      puts it; give float64 points for groups exact in float64).
    """
    from .io.source import is_in_memory

    values, single = check_linking_lengths(linking_length)
    min_members = check_min_members(min_members)
    if not isinstance(relative, (bool, np.bool_)):
        raise InputError(f"relative must be True or False, got {relative!r}")
    local = (client in (None, False) and is_in_memory(source)) or tree is not None
    if not local:
        from .distributed.fof import fof_service

        return fof_service(source, values, single, bool(relative), box_size, min_members,
                           velocities, ids=ids, masses=masses, backend=backend,
                           client=client, out=out, overwrite=overwrite, columns=columns,
                           array=array, progress=progress, **service_options)
    return fof_here(source, values, single, bool(relative), box_size, min_members, velocities,
                    ids=ids, masses=masses, backend=backend, out=out, overwrite=overwrite,
                    columns=columns, array=array, tree=tree, progress=progress,
                    **service_options)


def fof_here(source, values, single, relative, box_size, min_members, velocities, *,
             ids=None, masses=None, backend="auto", out=None, overwrite=False, columns=None, array=None, tree=None,
             progress=None, storage_options=None, out_storage_options=None, zarr_format=3,
             **ignored):
    """``fof`` in this process (checked parameters; see ``fof``)."""
    from .io import as_points, resolve_output, resolve_source
    from .io.checks import check_backend, source_box_size
    from .io.source import is_in_memory
    from .products.snapshots import position_member, read_velocities

    check_backend(backend)
    if is_in_memory(source):
        if columns is not None or array is not None:
            raise InputError("array= and columns= select members of a Zarr group; the "
                             "source is an in-memory array")
        points = as_points(source)
        where = f"points ({points.shape[0]}, {points.shape[1]}) {points.dtype}"
    else:
        array = position_member(source, array, columns, velocities, storage_options)
        src = resolve_source(source, array=array, columns=columns,
                             storage_options=storage_options)
        where = src.describe()
        points = None  # read below, after every check that needs no coordinates
    n, d = (points.shape if points is not None else (src.n, src.d))
    box_size = check_stated_box(box_size, src if points is None else None)
    if isinstance(box_size, str) and points is None:
        box = source_box_size(box_size, src)  # "snapshot": its BoxSize attribute
    elif isinstance(box_size, str) and box_size == "snapshot":
        raise InputError("box_size='snapshot' reads the BoxSize attribute of a Zarr "
                         "snapshot; the source is an in-memory array: give box_size=L")
    else:
        box = check_box_size(box_size, d)
    vel_name = velocities if isinstance(velocities, str) else None
    if vel_name is not None:
        velocities = read_velocities(source, vel_name, n, d, storage_options, array)
    elif velocities is not None:
        velocities = check_velocities(velocities, n, d)
    ids, masses, member_labels = read_ids_masses(source, ids, masses, n, array=array,
                                                 storage_options=storage_options)
    output = check_catalogue_output(resolve_output(
        out, overwrite=overwrite, zarr_format=zarr_format, storage_options=out_storage_options,
        source_location=None if points is not None else src.location, contents="clusters"))
    if tree is not None:
        tree = load_tree(tree)
        check_tree(tree, n, d, box)
    if points is None:
        points = src.read_all()
    if box is not None:
        check_in_box(points, box)
    if tree is not None:
        check_weights_of(tree, points, box, where)
    lengths = absolute_lengths(values, relative, points, box)
    timings = {}
    if tree is None:
        t0 = time.perf_counter()
        tree = spanning_tree_in_box(points, box, backend, progress)
        timings["tree"] = time.perf_counter() - t0
    cat = catalogue_of_tree(points, tree, lengths, single, min_members, box, velocities,
                            relative=relative, given=values, timings=timings, ids=ids,
                            masses=masses)
    if output is None:
        return cat
    return cat.to_zarr(output, input=where, velocities=vel_name or
                       (None if velocities is None else "array"), **member_labels)
