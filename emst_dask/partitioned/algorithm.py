"""The exact partitioned EMST, written once for every driver.

A cloud is split into P axis-aligned boxes by recursive coordinate
bisection; each box is solved on its own (phase 1: the box's MST and the
local certificate, no communication); the super-vertices left hugging the
shared faces are connected exactly (phase 2: shell and ghost exchange
within a radius R, an MST per box, a spanning forest over super-vertices,
and the check that every chosen edge is at most R, else a wider round).
The edge set is the same for every P (strict order (w, min id, max id) on
global ids throughout).

Facts used:

* Restriction: a global MST edge whose two ends lie in a point set S is an
  edge of MST(S).
* Local certificate: with b(x) the distance from x to the nearest face its
  box shares with another box, nothing outside the box is closer to x than
  b(x); an edge leaving a local component C with weight w < min_C b(x) is a
  global MST edge.
* Phase 2: every global MST edge missing from the candidates is a cross-box
  edge longer than R, so if the forest spans and its longest edge is <= R it
  is exact; otherwise R grows to that edge (at most once more, since the
  longest edge of an MSF of a superset cannot grow).

Squared distances are compared in one exact frame for the whole cloud
(``engine.scaling``: a power-of-two scaling, and float64 for a float32
cloud that float32 cannot square), chosen from the blocks' bounds before
the split; the blocks are scaled as they are split, every phase works in
that frame, and the weights are scaled back at the output, rounded as the
one-box engine rounds them.

The phases below run their steps (``emst_dask.partitioned.steps``) through
an ``Executor``: ``LocalExecutor`` in this process, the Dask driver's on
the workers of a cluster (``emst_dask.distributed.partitioned``).  One
timer per phase goes to the job's ``PartitionReport``.
"""
from __future__ import annotations

import contextlib
import logging
import time
from dataclasses import dataclass
from typing import Any, Callable, Protocol

import numpy as np

from ..errors import InputError
from . import steps
from .boxes import Partitioning, mean_spacing, recursive_coordinate_bisection
from .report import PartitionReport

log = logging.getLogger(__name__)

#: rows sampled in all for the bisection
SAMPLE_SIZE = 200_000


class Executor(Protocol):
    """Where the steps of a partitioned job run.

    Handles are whatever the executor returns from ``submit`` (values in
    this process, futures on a cluster); a step's arguments may be handles.
    """

    #: the places (workers) boxes are spread over; 0 in this process
    workers: int

    def owner(self, box: int) -> Any:
        """The place box ``box`` lives on."""

    def submit(self, fn: Callable, *args, box: int | None = None, name: str = "",
               urgent: bool = False) -> Any:
        """Run ``fn(*args)`` (on box ``box``'s place, when given); an urgent
        step runs before the place's other waiting steps (a small step that
        lets work begin beside the others, as a box's write does)."""

    def item(self, handle, key, box: int | None = None) -> Any:
        """``handle[key]`` as a handle (computed where ``handle`` is)."""

    def gather(self, handles: list) -> list:
        """The values of ``handles``."""

    def wait(self, handles: list) -> None:
        """Until ``handles`` are computed."""

    def shuffle_bytes(self, split: list, boxes: list) -> int:
        """Bytes of the pieces of ``split`` (one dict per block) that were
        made elsewhere than their box."""

    def exchange(self, blocks: list, partitioning: Partitioning, frame: str, exponent: int,
                 min_samples: int):
        """(the boxes' handles: ``blocks`` taken to the frame and split by
        box on the places' devices, and the boxes assembled there in one
        exchange (``partitioned.exchange``), the bytes that crossed, how
        they crossed, per place the seconds of its steps); None where the
        executor has no such exchange (the blocks are then split on the
        host and the pieces move one by one)."""


@dataclass
class Partitioned:
    """What the phases leave for the output step (handles of ``ex``).

    solved : per box, phase 1's (BoxResult, seconds, backend).
    infos : per box, ``steps.solve_info``.
    forest : the phase-2 spanning forest (``Edges``) over super-vertices.
    cores : per box, (gids, squared core distances), or None.
    period : (d,) float64 lengths of the periodic box, or None (input units).
    exponent : the frame's scaling: squared weights and core distances are
        of the points times ``2**exponent`` (``weights_from_squares`` takes
        them back to input units).
    """

    n: int
    d: int
    dtype: np.dtype
    min_samples: int
    backend: str
    solved: list
    infos: list
    forest: Any
    cores: list | None
    report: PartitionReport
    period: Any = None
    exponent: int = 0


@contextlib.contextmanager
def phase(report: PartitionReport, name: str):
    """Add the wall time of the block to ``report.seconds[name]`` (and log
    it at INFO level as it ends: a long job's progress)."""
    t0 = time.perf_counter()
    try:
        yield
    finally:
        dt = time.perf_counter() - t0
        report.seconds[name] = report.seconds.get(name, 0.0) + dt
        log.info("partitioned job (P=%d): %s took %.2f s", report.partitions, name, dt)


def compute(ex: Executor, blocks: list, n: int, d: int, dtype, P: int, min_samples: int,
            backend: str, report: PartitionReport, *, seed: int = 0, max_rounds: int = 8,
            certificate: str = "auto", period=None, after_solve=None) -> Partitioned:
    """The exact EMST of the cloud in ``blocks``, split into P boxes.

    Parameters
    ----------
    ex : Executor
    blocks : list of handles of ``steps.Block`` (rows in the compute dtype),
        emptied once they are split (``shuffle``)
    n, d : int
    dtype : float32 or float64
    P : int
        Boxes, >= 1.
    min_samples : int
    backend : {"auto", "cpu", "cuda"}
        Of the places that solve the boxes.
    report : PartitionReport
        Filled as the phases run.
    seed : int
        Of the bisection's sample.
    max_rounds : int
        Phase-2 rounds before giving up (two are enough in theory).
    certificate : {"auto", "kruskal", "boruvka"}
        Phase 1's certificate (tests pin one).
    period : (d,) float64, optional
        A periodic box: the boxes tile [0, period), a face on the global
        boundary is shared with the box at the other end of its axis, and
        every distance is minimum-image.
    after_solve : callable, optional
        ``after_solve(b, solved, before, more, exponent)``, called as box b's
        phase 1 is submitted (``solved``: its ``steps.solve`` handle,
        ``before``: the ``steps.solve_info`` handles of boxes 0..b-1,
        ``more``: whether its place solves another box after it): the
        output step submits the box's write there, to begin as soon as the
        box is solved.  It returns None, or where it moves the box's
        certified edges off the device first, that step's handle: the
        place's next box waits for it, and its item 0 is the box's solve
        result without them, which phase 2 takes instead.
    """
    dtype = np.dtype(dtype)
    with phase(report, "partition"):
        partitioning, frame, exponent = split_into_boxes(ex, blocks, n, P, seed, period, dtype)
    with phase(report, "shuffle"):
        boxes = shuffle(ex, blocks, partitioning, frame, exponent, report, min_samples)
    cores = None
    if min_samples > 1:
        with phase(report, "core_distances"):
            boxes, cores = core_distances(ex, boxes, partitioning, min_samples, backend, report)
    with phase(report, "phase1"):
        solved, infos = solve_boxes(ex, boxes, min_samples, backend, certificate, report,
                                    after_solve and (lambda *a: after_solve(*a, exponent)))
    with phase(report, "phase2"):
        forest = connect_super_vertices(ex, boxes, solved, infos, partitioning, n, frame,
                                        min_samples, backend, report, max_rounds)
    report.radius = float(np.ldexp(report.radius, -exponent))
    return Partitioned(n, d, dtype, min_samples, infos[0]["backend"], solved, infos, forest,
                       cores, report, period, exponent)


def split_into_boxes(ex: Executor, blocks: list, n: int, P: int, seed: int,
                     period, dtype) -> tuple[Partitioning, np.dtype, int]:
    """Bounds and a sample of every block, the exact frame, then recursive
    coordinate bisection in that frame.

    Returns
    -------
    (Partitioning in the frame, the frame's dtype, its exponent): the
    points times ``2**exponent`` in that dtype square exactly
    (``engine.scaling.exact_frame``; a cloud no frame holds is refused
    here, before any box is solved).
    """
    from ..engine.scaling import exact_frame, periodic_frame

    sums = ex.gather([ex.submit(steps.summarize, b, n, SAMPLE_SIZE, seed, period,
                                name=f"summary-{i}")
                      for i, b in enumerate(blocks)])
    glo = np.min([s["lo"] for s in sums if s["m"]], axis=0)
    ghi = np.max([s["hi"] for s in sums if s["m"]], axis=0)
    smallest = min(s["smallest"] for s in sums)
    try:
        frame, e = (periodic_frame(glo, ghi, smallest, dtype, np.asarray(period, np.float64))
                    if period is not None else exact_frame(glo, ghi, smallest, dtype))
    except InputError as exc:
        raise InputError(f"partitions=: {exc}") from None
    sample = np.ldexp(np.concatenate([s["sample"] for s in sums]), e)
    scaled_period = None if period is None else np.ldexp(np.asarray(period, np.float64), e)
    return (recursive_coordinate_bisection(sample, P, np.ldexp(glo, e), np.ldexp(ghi, e),
                                           scaled_period), frame, e)


def shuffle(ex: Executor, blocks: list, partitioning: Partitioning, frame, exponent: int,
            report: PartitionReport, min_samples: int = 1) -> list:
    """Every block taken to the frame (``frame`` dtype, times
    ``2**exponent``) and split by box; each box assembled on its place
    (by one exchange between the places' devices where the executor has
    one, else piece by piece).

    ``blocks`` (the caller's list) is emptied once every block is split:
    their rows live on in the pieces, and a worker that holds the whole
    cloud (one GPU, P boxes) would otherwise hold it three times while the
    boxes are assembled (blocks, pieces, boxes).  A lost box is still
    recomputed from the source (its task's lineage).
    """
    P = partitioning.n_boxes
    moved = ex.exchange(blocks, partitioning, np.dtype(frame).str, exponent, min_samples)
    if moved is not None:
        blocks.clear()
        boxes, report.bytes_moved["shuffle"], report.shuffle_by, report.shuffle_steps = moved
        report.exchanges += 1
        return boxes
    split = [ex.submit(steps.split_block, b, partitioning, np.dtype(frame).str, exponent,
                       name=f"split-{i}")
             for i, b in enumerate(blocks)]
    pieces = [[ex.item(s, k) for k in range(P)] for s in split]
    boxes = [ex.submit(steps.assemble_box, k, partitioning, *[p[k] for p in pieces], box=k,
                       name="box") for k in range(P)]
    ex.wait(split)
    blocks.clear()
    ex.wait(boxes)
    report.bytes_moved["shuffle"] = ex.shuffle_bytes(split, boxes)
    report.shuffle_by = "dask" if ex.workers else "none"
    report.exchanges += 1
    return boxes


def core_distances(ex: Executor, boxes: list, partitioning: Partitioning, k: int,
                   backend: str, report: PartitionReport):
    """Exact squared core distances: local ones, then the unsure points
    again with the ghosts within their radius (one exchange)."""
    P = len(boxes)
    local = [ex.submit(steps.local_core, bx, k, backend, box=b, name="core")
             for b, bx in enumerate(boxes)]
    boxes = [ex.item(f, 0, box=b) for b, f in enumerate(local)]
    radii = dict(enumerate(ex.gather([ex.item(f, 1, box=b) for b, f in enumerate(local)])))
    want = {b: r for b, r in radii.items() if r > 0}
    if want:
        ghosts = [ex.submit(steps.core_ghosts, bx, partitioning, want, box=b, name="coreghosts")
                  for b, bx in enumerate(boxes)]
        sizes = ex.gather([ex.submit(steps.piece_sizes, g, box=b) for b, g in enumerate(ghosts)])
        moved = 0
        for b in want:
            srcs = [j for j in range(P) if b in sizes[j]]
            moved += sum(sizes[j][b] for j in srcs if ex.owner(j) != ex.owner(b))
            incoming = [ex.item(ghosts[j], b, box=j) for j in srcs]
            boxes[b] = ex.submit(steps.fix_core, boxes[b], k, backend, *incoming, box=b,
                                 name="corefix")
        report.bytes_moved["core_ghosts"] = int(moved)
        report.exchanges += 1
    ex.wait(boxes)
    cores = [ex.submit(steps.core_of, bx, box=b, name="cores") for b, bx in enumerate(boxes)]
    return boxes, cores


def solve_boxes(ex: Executor, boxes: list, k: int, backend: str, certificate: str,
                report: PartitionReport, after_solve=None):
    """Phase 1 on every box at once: (solved, infos).

    With ``after_solve`` (the box writes, begun as each box is solved), a
    place that solves several boxes in turn (one GPU, P boxes) takes up a
    box only after what ``after_solve`` gave for its previous one (the
    previous box's certified edges moved off the device; else its info),
    which is urgent: so that box's write begins, and leaves the place's
    slot, before the next box's phase 1, and runs beside it instead of
    after the place's last box; and the device no longer holds those
    edges while the next box is solved."""
    places = [ex.owner(b) for b in range(len(boxes))]
    solved, info_handles, turn = [], [], {}
    for b, bx in enumerate(boxes):
        after = [turn[places[b]]] if places[b] in turn else []
        solved.append(ex.submit(steps.solve, bx, k, backend, certificate, *after, box=b,
                                name="solve"))
        info_handles.append(ex.submit(steps.solve_info, solved[b], box=b, name="info",
                                      urgent=True))
        if after_solve is not None:
            moved = after_solve(b, solved[b], info_handles[:b], places[b] in places[b + 1:])
            if moved is not None:   # the certified edges left the device: phase 2 takes
                solved[b] = ex.item(moved, 0, box=b)   # the box from there
            turn[places[b]] = info_handles[b] if moved is None else moved
    del turn
    infos = ex.gather(info_handles)
    sizes = ex.gather([ex.submit(steps.box_info, bx, box=b) for b, bx in enumerate(boxes)])
    report.boxes = [dict(box=b, worker=str(ex.owner(b)), n=s["n"], certified=i["certified"],
                         uncertified=i["uncertified"], super_vertices=i["n_super"],
                         phase1_seconds=i["seconds"], phase1_steps=i["steps"],
                         backend=i["backend"])
                    for b, (i, s) in enumerate(zip(infos, sizes))]
    report.n_certified = int(sum(i["certified"] for i in infos))
    # super-vertices are disjoint across boxes (labels are global ids)
    report.n_super_vertices = int(sum(i["n_super"] for i in infos))
    return solved, infos


def connect_super_vertices(ex: Executor, boxes: list, solved: list, infos: list,
                           partitioning: Partitioning, n: int, dtype, k: int, backend: str,
                           report: PartitionReport, max_rounds: int):
    """Phase 2: rounds of shell and ghost exchange within R until the
    spanning forest over super-vertices spans and no edge exceeds R.

    Returns the forest's handle (an ``Edges``; recomputable from the boxes,
    so a place lost afterwards costs a recomputation, never the job).
    """
    P = len(boxes)
    n_super = report.n_super_vertices
    # R starts at the longest local MST edge (cross-box MST edges are usually
    # no longer), and at least twice the mean spacing for near-empty boxes
    radius2 = max([i["max_local2"] for i in infos] + [4.0 * mean_spacing(partitioning, n) ** 2])
    forest = ex.submit(steps.spanning_forest, np.dtype(dtype).str, name="forest-empty")
    moved = 0
    while n_super > 1:
        report.rounds += 1
        report.exchanges += 1
        r = report.rounds
        radius = float(np.sqrt(radius2))
        out = [ex.submit(steps.outgoing, bx, s, partitioning, radius, box=b, name=f"out{r}")
               for b, (bx, s) in enumerate(zip(boxes, solved))]
        sizes = ex.gather([ex.submit(steps.piece_sizes, o, box=b) for b, o in enumerate(out)])
        forests = []
        for b in range(P):
            srcs = [j for j in range(P) if b in sizes[j]]
            moved += sum(sizes[j][b] for j in srcs if ex.owner(j) != ex.owner(b))
            incoming = [ex.item(out[j], b, box=j) for j in srcs]
            forests.append(ex.submit(steps.connect, boxes[b], solved[b], k, backend, *incoming,
                                     box=b, name=f"connect{r}"))
        forest = ex.submit(steps.spanning_forest_on, backend, np.dtype(dtype).str, *forests,
                           name=f"forest{r}")
        count, longest2, nbytes = ex.gather([ex.submit(steps.forest_summary, forest)])[0]
        moved += nbytes
        log.info("partitioned job (P=%d): phase 2 round %d, R %.6g: %.3g MB of shells and "
                 "ghosts, a forest of %d edges over %d super-vertices, longest %.6g",
                 P, r, radius, sum(sum(sz.values()) for sz in sizes) / 1e6, count, n_super,
                 float(np.sqrt(longest2)))
        if count == n_super - 1 and longest2 <= radius2:
            break
        if r >= max_rounds:
            raise RuntimeError("partitioned EMST did not certify its cross-box edges "
                               f"in {max_rounds} rounds; this is a bug, please report it")
        if count == n_super - 1:
            radius2 = longest2  # spans: one more round certifies it
        else:  # some super-vertex found no partner within R: widen fast
            ext2 = float(((partitioning.global_hi - partitioning.global_lo) ** 2).sum())
            radius2 = ext2 if r >= 2 else min(max(longest2, 16.0 * radius2), ext2)
    report.bytes_moved["phase2"] = int(moved)
    report.radius = float(np.sqrt(radius2))
    return forest
