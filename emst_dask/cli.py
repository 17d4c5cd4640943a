"""The ``emst-dask`` command.

    emst-dask generate NAME N --out FILE.npy|SNAPSHOT.zarr [--dim D] [--seed S] [--chunk-rows R]
    emst-dask run SOURCE [--out EDGES.npy|EDGES.zarr] [--scheduler ADDRESS | --scheduler-file FILE]
                  [--min-samples K] [--columns x,y,z] [--backend auto|cpu|cuda]
    emst-dask info EDGES
    emst-dask plot EDGES --points SOURCE --out mst.png
    emst-dask demo [--dir DIR] [--n N]

Every subcommand is a function on the ``main`` group.  Errors that are the
user's (bad input file, bad parameters, an unreachable scheduler) print one
line, ``Error: ...``, and exit with status 2; anything else is a bug and
keeps its traceback.
"""
from __future__ import annotations

import os
import sys
import time

import click

from . import __version__

#: exit status for errors in what the user gave us (as click's usage errors)
EXIT_INPUT = 2


class InputProblem(click.ClickException):
    """A one-line ``Error: ...`` for the user, exit status 2."""

    exit_code = EXIT_INPUT


class Count(click.ParamType):
    """A non-negative point count: ``1000000``, ``1_000_000`` or ``1e6``."""

    name = "N"

    def convert(self, value, param, ctx):
        if isinstance(value, int):
            n = value
        else:
            text = str(value).strip()
            try:
                n = int(text)
            except ValueError:
                try:
                    f = float(text)
                except ValueError:
                    self.fail(f"{value!r} is not a number of points", param, ctx)
                if not f.is_integer():
                    self.fail(f"{value!r} is not a whole number of points", param, ctx)
                n = int(f)
        if n < 0:
            self.fail(f"the number of points must be >= 0, got {n}", param, ctx)
        return n


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="emst-dask")
def main():
    """Exact Euclidean minimum spanning trees (single-tree Borůvka)."""


@main.command()
@click.argument("name", type=click.Choice(["uniform", "normal", "halos"]))
@click.argument("n", type=Count())
@click.option("--out", "-o", required=True, type=click.Path(dir_okay=True),
              help="where to write the (N, D) float32 cloud: FILE.npy, or a Zarr "
                   "snapshot (any other name, e.g. SNAPSHOT.zarr)")
@click.option("--dim", "-d", default=3, show_default=True, type=click.IntRange(1, 8),
              help="number of coordinates")
@click.option("--seed", "-s", default=0, show_default=True, type=int,
              help="random seed; the same (NAME, N, D, SEED) gives the same cloud")
@click.option("--chunk-rows", default=1_000_000, show_default=True, type=Count(),
              help="Zarr: rows per chunk")
@click.option("--zarr-format", default=3, show_default=True, type=click.Choice(["2", "3"]),
              help="Zarr: format version of the snapshot")
@click.option("--columns", default=None, metavar="x,y,z",
              help="Zarr: write D 1-D coordinate arrays with these names instead of "
                   "one (N, D) array named 'points'")
def generate(name, n, out, dim, seed, chunk_rows, zarr_format, columns):
    """Write a reference point cloud NAME (uniform, normal, halos) of N points."""
    from . import datasets

    t0 = time.perf_counter()
    pts = datasets.GENERATORS[name](n, dim=dim, seed=seed)
    if out.endswith(".npy"):
        if columns:
            raise InputProblem("--columns needs a Zarr output (not .npy)")
        _save(out, pts)
    else:
        _save_zarr(out, pts, chunk_rows=chunk_rows, zarr_format=int(zarr_format),
                   columns=columns, attrs={"generator": name, "n": int(n), "d": int(dim),
                                           "seed": int(seed)})
    click.echo(f"{name}: n={pts.shape[0]} d={pts.shape[1]} dtype={pts.dtype} "
               f"seed={seed} -> {out} ({time.perf_counter() - t0:.2f} s)")


def _save_zarr(out, pts, *, chunk_rows, zarr_format, columns=None, attrs=None):
    """A snapshot: a group with one (n, d) array 'points', or 1-D columns."""
    import shutil

    import zarr

    from .io import parse_columns
    from .validation import InputError

    n, d = pts.shape
    names = None
    if columns:
        try:
            names = parse_columns(columns)
        except InputError as exc:
            raise InputProblem(str(exc)) from None
        if len(names) != d:
            raise InputProblem(f"--columns names {len(names)} arrays for {d} coordinates")
    if os.path.exists(out):
        if not _is_zarr(out):
            raise InputProblem(f"{out}: exists and is not a Zarr store; not replacing it")
        shutil.rmtree(out) if os.path.isdir(out) else os.remove(out)
    rows = max(1, min(int(chunk_rows), max(n, 1)))
    try:
        group = zarr.open_group(out, mode="w-", zarr_format=zarr_format)
        if names is None:
            group.create_array("points", shape=(n, d), chunks=(rows, d), dtype=pts.dtype)[...] = pts
        else:
            for j, c in enumerate(names):
                group.create_array(c, shape=(n,), chunks=(rows,), dtype=pts.dtype)[...] = pts[:, j]
        group.attrs.update(attrs or {})
    except OSError as exc:
        raise InputProblem(f"cannot write {out}: {exc.strerror or exc}") from None


def _is_zarr(path) -> bool:
    return any(os.path.exists(os.path.join(path, f))
               for f in ("zarr.json", ".zgroup", ".zarray"))


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
              help="Zarr group: the (n, d) array to read")
@click.option("--backend", "-b", default="auto", show_default=True,
              type=click.Choice(["auto", "cpu", "cuda"]))
@click.option("--sort/--no-sort", default=False, show_default=True,
              help="order the edges by weight")
@click.option("--timings", is_flag=True, help="also print the seconds of every phase")
@click.option("--overwrite", is_flag=True, help="replace an existing edge store")
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
def run(source, out, scheduler, scheduler_file, min_samples, columns, array, backend, sort,
        timings, overwrite, progress, in_process, zarr_format, detach, name, partitions):
    """Compute the minimum spanning tree of the points in SOURCE.

    SOURCE is an (n, d) array in a .npy file or a Zarr snapshot (v2 or v3):
    one (n, d) array, or a group holding it (--array) or d 1-D coordinate
    arrays (--columns x,y,z).  With --scheduler or --scheduler-file the job
    runs on that Dask cluster (its workers read SOURCE and write EDGES, so
    both must be paths the workers see); without, a .npy cloud is computed
    in this process and anything involving Zarr on the embedded default
    cluster (a LocalCUDACluster with GPUs, else a LocalCluster).
    """
    from .kernels import cuda_available
    from .validation import InputError

    if scheduler and scheduler_file:
        raise InputProblem("give --scheduler or --scheduler-file, not both")
    scheduler_file = _env_scheduler_file(scheduler, scheduler_file)
    if backend == "cuda" and not (scheduler or scheduler_file) and not cuda_available():
        raise InputProblem("--backend cuda needs CuPy and a visible GPU "
                           "(pip install 'emst-dask[cuda]'); use --backend cpu")
    if progress is None:
        progress = sys.stderr.isatty()
    remote = scheduler or scheduler_file
    if partitions is not None:
        if partitions != "auto":
            try:
                partitions = int(partitions)
            except ValueError:
                raise InputProblem(f"--partitions must be 'auto' or an integer >= 1, got "
                                   f"{partitions!r}") from None
        if detach:
            raise InputProblem("--partitions runs while this command waits; drop --detach")
    plain = (not remote and source.endswith(".npy") and (out is None or out.endswith(".npy"))
             and columns is None and array is None and partitions is None)
    if plain:
        return _run_npy(source, out, min_samples, backend, sort, timings, progress)
    if remote:
        client = scheduler or os.path.abspath(scheduler_file)
        if scheduler_file and not os.path.exists(scheduler_file):
            raise InputProblem(f"{scheduler_file}: no such scheduler file")
    else:
        client = False if in_process else None
    if detach:
        if not remote or out is None:
            raise InputProblem("--detach needs --scheduler or --scheduler-file (a cluster "
                               "that outlives this command) and --out")
        return _detach(source, out, client, name, min_samples, backend, sort, columns, array,
                       overwrite, int(zarr_format), scheduler, scheduler_file)
    from .service import WorkerLost
    from .service import emst as service_emst

    t0 = time.perf_counter()
    try:
        if partitions is not None:
            from .multipart import emst as multipart_emst

            if client is False and not source.endswith(".npy"):
                raise InputProblem("--partitions with --in-process needs a .npy cloud")
            import numpy as np

            src = np.load(source) if client is False else source
            res = multipart_emst(src, client=client, partitions=partitions, out=out,
                                 min_samples=min_samples, backend=backend,
                                 sort_by_weight=sort, columns=columns, array=array,
                                 overwrite=overwrite, zarr_format=int(zarr_format))
        else:
            res = service_emst(source, client=client, out=out, min_samples=min_samples,
                               backend=backend, sort_by_weight=sort,
                               progress=progress or None, columns=columns, array=array,
                               overwrite=overwrite, zarr_format=int(zarr_format))
    except InputError as exc:
        raise InputProblem(str(exc)) from None
    except WorkerLost as exc:
        raise click.ClickException(str(exc)) from None
    except (OSError, TimeoutError) as exc:
        if remote:
            raise InputProblem(f"cannot reach the Dask scheduler {client}: {exc}") from None
        raise
    seconds = time.perf_counter() - t0
    _report(res, seconds, timings)
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


def _env_scheduler_file(scheduler, scheduler_file):
    """--scheduler-file, else $EMST_SCHEDULER_FILE when no --scheduler is given (set
    by the deploy/ scripts, e.g. inside the SLURM batch job)."""
    if scheduler or scheduler_file:
        return scheduler_file
    return os.environ.get("EMST_SCHEDULER_FILE") or None


def _scheduler_args(scheduler, scheduler_file):
    return (f"--scheduler {scheduler}" if scheduler
            else f"--scheduler-file {os.path.abspath(scheduler_file)}")


def _detach(source, out, client, name, min_samples, backend, sort, columns, array, overwrite,
            zarr_format, scheduler, scheduler_file):
    from .service import submit
    from .validation import InputError

    try:
        job = submit(source, out=out, client=client, name=name, min_samples=min_samples,
                     backend=backend, sort_by_weight=sort, columns=columns, array=array,
                     overwrite=overwrite, zarr_format=zarr_format)
    except InputError as exc:
        raise InputProblem(str(exc)) from None
    except (OSError, TimeoutError) as exc:
        raise InputProblem(f"cannot reach the Dask scheduler {client}: {exc}") from None
    click.echo(f"submitted job {job.name}: {source} -> {job.info['out']}")
    click.echo(f"follow it: emst-dask job {job.name} {_scheduler_args(scheduler, scheduler_file)}"
               " --wait")
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
def job(name, scheduler, scheduler_file, wait, progress, forget):
    """Status (and with --wait, the result) of the detached job NAME."""
    from .progress import ProgressBar
    from .service import _connect, get_job, list_jobs

    if scheduler and scheduler_file:
        raise InputProblem("give one of --scheduler or --scheduler-file")
    scheduler_file = _env_scheduler_file(scheduler, scheduler_file)
    if not (scheduler or scheduler_file):
        raise InputProblem("give one of --scheduler or --scheduler-file")
    try:
        client, _ = _connect(scheduler or os.path.abspath(scheduler_file))
    except (OSError, TimeoutError) as exc:
        raise InputProblem(f"cannot reach the Dask scheduler: {exc}") from None
    try:
        try:
            j = get_job(name, client)
        except LookupError as exc:
            raise InputProblem(str(exc)) from None
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
                from .progress import Relay

                Relay(client, j.topic, bar)
            try:
                res = j.result()
            except Exception as exc:
                raise InputProblem(f"job {name} failed: {exc}") from None
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
    from .store import EdgeStore

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


def _run_npy(file, out, min_samples, backend, sort, timings, progress):
    """A .npy cloud in this process (the command's original path)."""
    from .api import emst
    from .validation import InputError

    pts = _load(file)
    bar = None
    if progress:
        from .progress import ProgressBar

        bar = ProgressBar(os.path.basename(file))
        bar("start", n=int(pts.shape[0]) if pts.ndim else 0,
            d=int(pts.shape[1]) if pts.ndim == 2 else 0, backend=backend)
    t0 = time.perf_counter()
    try:
        tree = emst(pts, min_samples=min_samples, backend=backend, sort_by_weight=sort,
                    progress=bar)
    except InputError as exc:
        if bar:
            bar.close()
        raise InputProblem(f"{file}: {exc}") from None
    seconds = time.perf_counter() - t0
    if bar:
        bar("done", seconds=seconds, total_weight=tree.total_weight, n_edges=tree.n_edges)
    n, d = tree.n_points, tree.n_dims
    rate = n * d / seconds / 1e6 if seconds > 0 else float("inf")
    click.echo(f"n={n} d={d} dtype={pts.dtype} min_samples={tree.min_samples} "
               f"backend={tree.backend}")
    click.echo(f"seconds={seconds:.3f} iterations={tree.iterations} "
               f"MFeatures/s={rate:.2f}")
    click.echo(f"edges={tree.n_edges} total_weight={tree.total_weight!r}")
    if timings:
        for phase, sec in tree.timings.items():
            click.echo(f"  {phase:<32s} {sec:9.3f} s")
    if out is not None:
        _save(out, tree.to_numpy())
        click.echo(f"wrote {out}")


@main.command()
@click.argument("edges", type=click.Path())
def info(edges):
    """Describe the edge store EDGES (.zarr, or an (m, 3) .npy)."""
    import numpy as np

    from .store import open_edges
    from .validation import InputError

    try:
        st = open_edges(edges)
        w = np.asarray(st.weight[:], np.float64)
    except InputError as exc:
        raise InputProblem(str(exc)) from None
    a = st.attrs
    click.echo(f"path={st.path}")
    click.echo(f"n={a.get('n')} d={a.get('d')} edges={a.get('n_edges')} "
               f"min_samples={a.get('min_samples')} dtype={a.get('dtype')}")
    click.echo(f"total_weight={a.get('total_weight')!r}")
    if len(w):
        click.echo(f"weight min={float(w.min())!r} median={float(np.median(w))!r} "
                   f"max={float(w.max())!r}")
    else:
        click.echo("weight min=- median=- max=-")
    click.echo(f"input={a.get('input')}")
    click.echo(f"version={a.get('version')} backend={a.get('backend')} "
               f"iterations={a.get('iterations')} created={a.get('created')}")


@main.command()
@click.argument("edges", type=click.Path())
@click.option("--points", "-p", "points", required=True, type=click.Path(),
              help="the point cloud the edges index (.npy or Zarr)")
@click.option("--out", "-o", required=True, type=click.Path(dir_okay=False),
              help="the picture to write (.png)")
@click.option("--columns", default=None, metavar="x,y,z",
              help="Zarr group: the 1-D coordinate arrays, in order")
@click.option("--array", default=None, metavar="NAME", help="Zarr group: the (n, d) array")
@click.option("--slab", default=0.02, show_default=True, type=click.FloatRange(0, 1,
              min_open=True), help="slab thickness, as a fraction of the z extent")
@click.option("--max-points", default=30_000, show_default=True, type=Count(),
              help="crop the slab in x-y to about this many points")
def plot(edges, points, out, columns, array, slab, max_points):
    """Draw the tree: the edges of a thin slab in z projected to x-y, and the
    edge-length histogram (log scale)."""
    from .plotting import plot_tree
    from .validation import InputError

    try:
        summary = plot_tree(edges, points, out, columns=columns, array=array, slab=slab,
                            max_points=max_points)
    except InputError as exc:
        raise InputProblem(str(exc)) from None
    except OSError as exc:
        raise InputProblem(f"cannot write {out}: {exc.strerror or exc}") from None
    click.echo(summary)
    click.echo(f"wrote {out}")


@main.command()
@click.option("--dir", "workdir", default=None, type=click.Path(file_okay=False),
              help="where to put the snapshot, edges and picture (default: a new "
                   "temporary directory, kept)")
@click.option("--n", "n", default=200_000, show_default=True, type=Count(),
              help="points in the halos cloud")
@click.option("--workers", default=None, type=click.IntRange(1, 64),
              help="workers of the embedded cluster (default: one per GPU, or 1)")
@click.option("--backend", "-b", default="auto", show_default=True,
              type=click.Choice(["auto", "cpu", "cuda"]))
@click.option("--progress/--no-progress", default=True, show_default=True)
def demo(workdir, n, workers, backend, progress):
    """Generate a halos cloud as a Zarr snapshot, compute its tree on the
    embedded default cluster, write the edge store, draw it."""
    import tempfile

    from . import datasets
    from .plotting import plot_tree
    from .service import EmbeddedCluster, emst as service_emst
    from .store import open_edges

    if workdir is None:
        workdir = tempfile.mkdtemp(prefix="emst-dask-demo-")
    workdir = os.path.abspath(workdir)
    os.makedirs(workdir, exist_ok=True)
    snap = os.path.join(workdir, "halos.zarr")
    edges = os.path.join(workdir, "edges.zarr")
    png = os.path.join(workdir, "mst.png")
    t0 = time.perf_counter()
    pts = datasets.halos(n, dim=3, seed=0)
    _save_zarr(snap, pts, chunk_rows=max(1, -(-n // 8)), zarr_format=3,
               attrs={"generator": "halos", "n": int(n), "d": 3, "seed": 0})
    click.echo(f"snapshot: {snap} (halos, n={n}, d=3, 8 chunks, "
               f"{time.perf_counter() - t0:.1f} s)")
    t0 = time.perf_counter()
    with EmbeddedCluster(n_workers=workers, backend=backend) as emb:
        nw = len(emb.client.scheduler_info()["workers"])
        click.echo(f"cluster: {emb.kind} with {nw} worker(s), dashboard "
                   f"{emb.dashboard_link} ({time.perf_counter() - t0:.1f} s to start)")
        t0 = time.perf_counter()
        store = service_emst(snap, client=emb.client, out=edges, backend=backend,
                             overwrite=True, progress=True if progress else None)
        seconds = time.perf_counter() - t0
    click.echo(f"edges: {os.fspath(store)} ({store.n_edges} edges, total weight "
               f"{store.total_weight:.6g}, {seconds:.1f} s end to end)")
    summary = plot_tree(edges, snap, png)
    click.echo(f"picture: {png} ({summary})")
    st = open_edges(edges)
    click.echo(f"look: emst-dask info {st.path}")
    click.echo(f"everything is in {workdir}")


def _load(path):
    import numpy as np

    if not os.path.exists(path):
        raise InputProblem(f"{path}: no such file")
    try:
        with open(path, "rb") as fh:
            magic = fh.read(6)
        if magic[:2] == b"PK":
            raise InputProblem(f"{path}: is an .npz archive; give one (n, d) array as .npy")
        if magic != b"\x93NUMPY":
            raise InputProblem(f"{path}: is not a .npy file (numpy.save format)")
        arr = np.load(path, allow_pickle=False)
    except ValueError as exc:  # object arrays, damaged headers
        raise InputProblem(f"{path}: cannot be read as a numeric .npy array ({exc})") from None
    except OSError as exc:
        raise InputProblem(f"{path}: cannot be read ({exc.strerror or exc})") from None
    return arr


def _save(path, arr):
    import numpy as np

    try:
        with open(path, "wb") as fh:
            np.save(fh, arr)
    except OSError as exc:
        raise InputProblem(f"cannot write {path}: {exc.strerror or exc}") from None


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
