"""``emst-dask run`` and ``emst-dask job``: trees on this machine or a cluster."""
from __future__ import annotations

import os
import shlex
import sys
import time

import click

from .group import main
from .errors import UserError


@main.command()
@click.argument("source", type=click.Path())
@click.option("--out", "-o", type=click.Path(), default=None,
              help="where to write the edges: EDGES.npy, an (n-1, 3) float64 array "
                   "(source, target, weight), or an edge store EDGES.zarr; nothing is "
                   "written without it")
@click.option("--scheduler", default=None, metavar="ADDRESS",
              help="run on this Dask scheduler (e.g. tcp://10.0.0.1:8786)")
@click.option("--scheduler-file", default=None, type=click.Path(dir_okay=False),
              help="run on the Dask scheduler described by this file (default: "
                   "$EMST_SCHEDULER_FILE, when set and --scheduler is not given)")
@click.option("--min-samples", "-k", default=1, show_default=True, type=int,
              help="HDBSCAN* k_pts, counting the point itself (1: plain Euclidean MST)")
@click.option("--columns", default=None, metavar="x,y,z",
              help="Zarr group: the 1-D coordinate arrays, in order")
@click.option("--array", default=None, metavar="NAME",
              help="Zarr group: the (n, d) array to read (a path inside the group)")
@click.option("--backend", "-b", default="auto", show_default=True,
              type=click.Choice(["auto", "cpu", "cuda"]))
@click.option("--sort/--no-sort", default=False, show_default=True,
              help="order the edges by weight")
@click.option("--timings", is_flag=True, help="also print the seconds of every phase")
@click.option("--overwrite", is_flag=True,
              help="replace an existing edge store or edge array (never anything else)")
@click.option("--progress/--no-progress", default=None,
              help="show a progress bar (default: when stderr is a terminal)")
@click.option("--in-process", is_flag=True,
              help="without a scheduler: compute in this process instead of on the "
                   "embedded default cluster")
@click.option("--zarr-format", default=3, show_default=True, type=click.Choice(["2", "3"]),
              help="format of a Zarr edge store")
@click.option("--detach", is_flag=True,
              help="with a scheduler and --out: submit the job and return at once; it runs "
                   "on without this command (see `emst-dask job`)")
@click.option("--name", default=None, help="the job's name (default: made from SOURCE)")
@click.option("--partitions", "-P", default=None, metavar="auto|P",
              help="split the cloud into P spatial boxes over the cluster's workers (same "
                   "exact tree); 'auto': only when it does not fit one worker")
@click.option("--box-size", default=None, metavar="L|Lx,Ly,Lz|snapshot",
              help="a periodic box: distances under the minimum image, coordinates in "
                   "[0, L); 'snapshot': the snapshot's BoxSize (a Zarr attribute, or "
                   "Header/BoxSize)")
def run(source, out, scheduler, scheduler_file, min_samples, columns, array, backend, sort,
        timings, overwrite, progress, in_process, zarr_format, detach, name, partitions,
        box_size):
    """Compute the minimum spanning tree of the points in SOURCE.

    SOURCE is an (n, d) array in a .npy file or a Zarr snapshot (v2 or v3):
    one (n, d) array, or a group holding it (--array) or d 1-D coordinate
    arrays (--columns x,y,z); or a Gadget/Arepo/SWIFT HDF5 snapshot (a file,
    or the files of one by its stem or a glob; --array PartType1).  With --scheduler or --scheduler-file the job
    runs on that Dask cluster (its workers read SOURCE and write EDGES, so
    both must be paths the workers see); without, a .npy cloud is computed
    in this process and anything involving Zarr on the embedded default
    cluster (a LocalCUDACluster with GPUs, else a LocalCluster).
    """
    from ..api import emst
    from ..kernels import cuda_available

    if scheduler and scheduler_file:
        raise UserError("give --scheduler or --scheduler-file, not both")
    scheduler_file = _env_scheduler_file(scheduler, scheduler_file)
    remote = scheduler or scheduler_file
    if backend == "cuda" and not remote and not cuda_available():
        raise UserError("--backend cuda needs CuPy and a visible GPU "
                        "(pip install 'emst-dask[cuda]'); use --backend cpu")
    if progress is None:
        progress = sys.stderr.isatty()
    box_size = parse_box_size(box_size)
    if partitions is not None:
        if partitions != "auto":
            try:
                partitions = int(partitions)
            except ValueError:
                raise UserError(f"--partitions must be 'auto' or an integer >= 1, got "
                                f"{partitions!r}") from None
        if detach:
            raise UserError("--partitions runs while this command waits; drop --detach")
    plain = (source.endswith(".npy") and (out is None or out.endswith(".npy"))
             and columns is None and array is None and partitions is None)
    if remote:
        client = scheduler or os.path.abspath(scheduler_file)
    else:
        client = False if (in_process or plain) else None
    if detach:
        if not remote or out is None:
            raise UserError("--detach needs --scheduler or --scheduler-file (a cluster "
                            "that outlives this command) and --out")
        return _detach(source, out, client, name, min_samples, backend, sort, columns, array,
                       overwrite, int(zarr_format), scheduler, scheduler_file, box_size)
    points = source
    if partitions is not None and client is False:
        from ..io import resolve_source

        points = resolve_source(source, array=array, columns=columns).read_all()
        columns = array = None
        if out is not None:
            raise UserError("--partitions with --in-process returns the tree here; drop "
                            "--out or run it on a cluster")
    t0 = time.perf_counter()
    res = emst(points, client=client, out=out, min_samples=min_samples, backend=backend,
               sort_by_weight=sort, progress=progress or None, columns=columns, array=array,
               partitions=partitions, overwrite=overwrite, zarr_format=int(zarr_format),
               name=name, box_size=box_size)
    _report(res, time.perf_counter() - t0, timings)
    rep = getattr(res, "report", None)
    if rep is None and hasattr(res, "attrs"):
        rep = res.attrs.get("partitioned")
    if rep is not None:
        rep = rep if isinstance(rep, dict) else rep.as_dict()
        click.echo(f"partitions={rep['partitions']} workers={rep['workers']} "
                   f"rounds={rep['rounds']} super_vertices={rep['n_super_vertices']} "
                   f"bytes_moved={rep['total_bytes_moved']} {rep['bytes_moved']}")
    if out is not None:
        click.echo(f"wrote {os.fspath(res)}")


def parse_box_size(text):
    """``--box-size``: None, "snapshot", or a list of floats ("L" or "Lx,Ly,Lz")."""
    if text is None or text == "snapshot":
        return text
    try:
        return [float(v) for v in text.split(",")]
    except ValueError:
        raise UserError(f"--box-size must be L, Lx,Ly,Lz or 'snapshot'; got {text!r}") from None


def _env_scheduler_file(scheduler, scheduler_file):
    """--scheduler-file, else $EMST_SCHEDULER_FILE when no --scheduler is given (set
    by the deploy/ scripts, e.g. inside the SLURM batch job)."""
    if scheduler or scheduler_file:
        return scheduler_file
    return os.environ.get("EMST_SCHEDULER_FILE") or None


def _scheduler_args(scheduler, scheduler_file):
    return (f"--scheduler {shlex.quote(scheduler)}" if scheduler
            else f"--scheduler-file {shlex.quote(os.path.abspath(scheduler_file))}")


def _detach(source, out, client, name, min_samples, backend, sort, columns, array, overwrite,
            zarr_format, scheduler, scheduler_file, box_size=None):
    from ..distributed.service import submit

    job = submit(source, out=out, client=client, name=name, min_samples=min_samples,
                 backend=backend, sort_by_weight=sort, columns=columns, array=array,
                 overwrite=overwrite, zarr_format=zarr_format, box_size=box_size)
    click.echo(f"submitted job {job.name}: {source} -> {job.info['out']}")
    # options first and the name after "--": a name may hold spaces or start with "-"
    click.echo(f"follow it: emst-dask job {_scheduler_args(scheduler, scheduler_file)} --wait"
               f" -- {shlex.quote(job.name)}")
    job.client.close()


@main.command()
@click.argument("name")
@click.option("--scheduler", default=None, metavar="ADDRESS", help="the Dask scheduler")
@click.option("--scheduler-file", default=None, type=click.Path(dir_okay=False),
              help="the Dask scheduler, by its scheduler file (default: $EMST_SCHEDULER_FILE)")
@click.option("--wait", is_flag=True, help="wait for the job to finish")
@click.option("--progress/--no-progress", default=None,
              help="with --wait: a progress bar (default: when stderr is a terminal)")
@click.option("--forget", is_flag=True,
              help="once finished, remove the job from the scheduler (its store stays)")
@click.option("--cancel", is_flag=True,
              help="stop the job (its worker stops at its next progress report and "
                   "writes nothing)")
def job(name, scheduler, scheduler_file, wait, progress, forget, cancel):
    """Status (and with --wait, the result) of the detached job NAME."""
    from ..distributed.client import connect
    from ..distributed.service import get_job, list_jobs
    from ..progress import ProgressBar, Relay

    if scheduler and scheduler_file:
        raise UserError("give one of --scheduler or --scheduler-file")
    scheduler_file = _env_scheduler_file(scheduler, scheduler_file)
    if not (scheduler or scheduler_file):
        raise UserError("give one of --scheduler or --scheduler-file")
    client, _ = connect(scheduler or os.path.abspath(scheduler_file))
    try:
        j = get_job(name, client)
        if cancel and not j.done():
            j.cancel()
        click.echo(f"job {name}: {j.status()} ({j.info.get('input')} -> {j.info.get('out')})")
        last = j.phase()
        if last:
            info = ", ".join(f"{k}={v}" for k, v in last.items()
                             if k not in ("phase", "job", "time", "worker"))
            click.echo(f"last event: {last.get('phase')} {info}".rstrip())
        if wait:
            if progress is None:
                progress = sys.stderr.isatty()
            if progress:
                bar = ProgressBar(name)
                for ev in j.events():  # replay what happened so far
                    ev = dict(ev)
                    phase = ev.pop("phase")
                    bar(phase, **{k: v for k, v in ev.items() if k not in ("job", "time")})
                Relay(client, j.topic, bar)
            res = j.result()
            click.echo(f"job {name}: finished")
            _report(res, float("nan"), False)
            if j.info.get("out"):
                click.echo(f"wrote {os.fspath(res)}")
        if forget and j.done():
            j.forget()
            click.echo(f"forgot job {name}; jobs left: {', '.join(list_jobs(client)) or 'none'}")
    finally:
        client.close()


def _report(res, seconds, timings):
    """Print the summary of a SpanningTree or an EdgeStore."""
    from ..io import EdgeStore

    if isinstance(res, EdgeStore):
        a = res.attrs
        n, d, k, be, it = a["n"], a["d"], a["min_samples"], a["backend"], a["iterations"]
        dtype, n_edges, total, phases = a["dtype"], a["n_edges"], a["total_weight"], a["timings"]
    else:
        n, d, k, be, it = res.n_points, res.n_dims, res.min_samples, res.backend, res.iterations
        dtype = res.weight.dtype
        n_edges, total, phases = res.n_edges, res.total_weight, res.timings
    click.echo(f"n={n} d={d} dtype={dtype} min_samples={k} backend={be}")
    if seconds == seconds:  # not NaN: timed here
        rate = n * d / seconds / 1e6 if seconds > 0 else float("inf")
        click.echo(f"seconds={seconds:.3f} iterations={it} MFeatures/s={rate:.2f}")
    else:
        click.echo(f"iterations={it}")
    click.echo(f"edges={n_edges} total_weight={total!r}")
    if timings:
        for phase, sec in phases.items():
            click.echo(f"  {phase:<32s} {sec:9.3f} s")
