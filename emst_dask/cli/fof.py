"""``emst-dask fof``: a friends-of-friends halo catalogue of a snapshot."""
from __future__ import annotations

import os
import sys
import time

import click

from .group import main
from .errors import UserError


def _box(values):
    """``--box-size``: nothing, "snapshot", or one or d numbers."""
    if not values:
        return None
    if len(values) == 1 and values[0].strip().lower() in ("snapshot", "open"):
        return values[0].strip().lower()
    try:  # "L", "Lx,Ly,Lz", or the option repeated
        out = [float(v) for text in values for v in text.split(",") if v.strip()]
    except ValueError:
        raise UserError(f"--box-size takes numbers (one, or one per axis) or 'snapshot'; got "
                        f"{' '.join(values)}") from None
    return out[0] if len(out) == 1 else out


@main.command()
@click.argument("source", type=click.Path())
@click.option("--linking-length", "-b", "lengths", multiple=True, type=float,
              help="linking length b (repeat for several: one tree) [default: 0.2]")
@click.option("--absolute", is_flag=True,
              help="b in the points' units (default: in units of the mean separation "
                   "(V/n)^(1/d), V the box's volume or the bounding box's)")
@click.option("--box-size", "box", multiple=True, metavar="L|Lx,Ly,Lz|snapshot|open",
              help="the periodic box [0, L): one length, or one per axis; 'snapshot' "
                   "takes the snapshot's BoxSize (attribute, or Header/BoxSize); 'open': "
                   "no box, for a snapshot that has one (otherwise refused)")
@click.option("--min-members", "-m", default=20, show_default=True, type=int,
              help="the smallest group kept in the catalogue")
@click.option("--velocities", default=None, metavar="NAME",
              help="the snapshot's velocity array: each group's mean velocity")
@click.option("--ids", default=None, metavar="NAME",
              help="the snapshot's particle IDs (e.g. ParticleIDs): the catalogue lists "
                   "each group's members' IDs (IDs, GroupOffset)")
@click.option("--masses", default=None, metavar="NAME",
              help="the snapshot's particle masses (e.g. Masses): mass-weighted centres, "
                   "GroupMass")
@click.option("--out", "-o", required=True, type=click.Path(),
              help="the catalogue: a Zarr group HALOS.zarr (labels, length, centre of "
                   "mass, velocity)")
@click.option("--overwrite", is_flag=True, help="replace a catalogue this package wrote")
@click.option("--array", default=None, metavar="NAME",
              help="Zarr group: the (n, d) positions (default: the one (n, d) array other "
                   "than the velocities, else 'Position'); HDF5 snapshot: the particle type "
                   "(PartType1; default: the one with coordinates)")
@click.option("--columns", default=None, metavar="x,y,z", help="Zarr group: 1-D coordinates")
@click.option("--tree", default=None, type=click.Path(),
              help="an edge store of this snapshot's Euclidean tree, computed in the same "
                   "box: not computed again (the catalogue is then made in this process)")
@click.option("--scheduler", default=None, metavar="ADDRESS", help="run on this Dask scheduler")
@click.option("--scheduler-file", default=None, type=click.Path(dir_okay=False),
              help="run on the Dask scheduler of this file")
@click.option("--in-process", is_flag=True,
              help="without a scheduler: compute here instead of on the embedded cluster")
@click.option("--backend", default="auto", show_default=True,
              type=click.Choice(["auto", "cpu", "cuda"]))
@click.option("--progress/--no-progress", default=None,
              help="a progress bar (default: when stderr is a terminal)")
def fof(source, lengths, absolute, box, min_members, velocities, ids, masses, out, overwrite,
        array, columns, tree, scheduler, scheduler_file, in_process, backend, progress):
    """Friends-of-friends groups of the points in SOURCE and their catalogue
    (member count, centre of mass, mean velocity), written to OUT.

    Prints one line per linking length: the groups, the largest, and the
    fraction of the points in groups.
    """
    from ..fof_api import fof as run_fof
    from .run import _env_scheduler_file

    if scheduler and scheduler_file:
        raise UserError("give --scheduler or --scheduler-file, not both")
    scheduler_file = _env_scheduler_file(scheduler, scheduler_file)
    if scheduler or scheduler_file:
        client = scheduler or os.path.abspath(scheduler_file)
    else:
        client = False if in_process else None
    if progress is None:
        progress = sys.stderr.isatty()
    b = list(lengths) if len(lengths) > 1 else (lengths[0] if lengths else 0.2)
    t0 = time.perf_counter()
    store = run_fof(source, b, relative=not absolute, box_size=_box(box),
                    min_members=min_members, velocities=velocities, ids=ids, masses=masses,
                    backend=backend,
                    client=client, out=out, overwrite=overwrite, columns=columns, array=array,
                    tree=tree, progress=progress or None)
    seconds = time.perf_counter() - t0
    given = store.attrs["linking_length_given"]
    for g, row in zip(given, store.summary()):
        click.echo(f"b={g!r} (absolute {row['linking_length']:.6g}): groups={row['groups']} "
                   f"largest={row['largest']} in_groups={100 * row['fraction']:.2f}%")
    click.echo(f"n={store.attrs['n']} seconds={seconds:.3f}")
    click.echo(f"wrote {store.path}")
