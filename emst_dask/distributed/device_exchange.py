"""The partitioned job's shuffle through NCCL: the Dask side.

When every worker of the job is a GPU worker with NCCL (``nccl``), the
blocks' pieces do not travel through Dask's comms one by one: each worker
runs one exchange task (``nccl.exchange_task``) that sends every other
worker, device to device, the rows of its blocks that fall in that
worker's boxes, and assembles its own boxes on its GPU.  The plan (rows
per block and box, who holds which block) comes from the blocks' sizes
and Dask's ``who_has``, so the tasks exchange only points and ids.

The blocks are split by box on the GPUs too (only their coordinates
cross to the device; the global ids are made there), so a point crosses
the host-device boundary once.

On one GPU worker nothing crosses between places: the blocks are split
on its GPU and every box is assembled there (``one_device``), where they
fit it for the whole job.

Not taken (the pieces then move through Dask): the CPU backend, a
worker whose GPU cannot hold its boxes for the whole job (one worker:
every box; several: its pieces, what it receives, its boxes and one box's
phase 1, from the plan's row counts), mutual reachability (its core
distances run on host boxes), a worker without NCCL, or
``emst_dask.partitioned.exchange`` set to "dask".
An exchange that fails (a worker gone, a timeout) is abandoned for the
Dask shuffle, the blocks split on the host again.
"""
from __future__ import annotations

import logging
import threading

import numpy as np

from ..errors import InputError
from ..partitioned import steps
from ..partitioned.exchange import make_plan
from . import nccl
from .faults import refusing

log = logging.getLogger(__name__)

#: {(scheduler address, worker tuple): unique id} of the communicators made
_UIDS: dict = {}
_LOCK = threading.Lock()


def device_exchange(ex, blocks: list, partitioning, frame: str, exponent: int,
                    min_samples: int):
    """``Executor.exchange`` of a ``DaskExecutor``: (box handles, bytes
    moved, "nccl", per rank the seconds of its steps), or None where the
    exchange is not taken or failed.

    Parameters
    ----------
    ex : DaskExecutor
    blocks : list of futures of ``steps.Block``, by row
    partitioning : Partitioning
    frame : str, the frame's dtype; exponent : int, its power of two
    min_samples : int
    """
    mode = nccl.exchange_mode()
    if mode == "dask" or min_samples > 1 or ex.backend == "cpu":
        return None
    if ex.workers == 1:
        return one_device(ex, blocks, partitioning, frame, exponent)
    if ex.workers < 2:
        return None
    client, places = ex.client, list(ex.places)
    try:
        ready = client.run(nccl.ready, ex.backend, workers=places)
    except Exception:  # a worker gone meanwhile: the Dask shuffle copes
        return None
    if not all(ready.get(w) for w in places):
        if mode == "nccl":
            log.warning("%s is 'nccl' but a worker has no GPU with NCCL: the shuffle goes "
                        "through Dask", nccl.EXCHANGE_KEY)
        return None
    P = partitioning.n_boxes
    # each block split by box on the GPU of the worker that read it
    split = [client.submit(refusing(nccl.split_task), b, partitioning, frame, exponent,
                           key=ex._key(f"dsplit-{i}", None), pure=False)
             for i, b in enumerate(blocks)]
    try:
        rows = ex.gather([ex.submit(steps.piece_rows, s, name=f"rows-{i}")
                          for i, s in enumerate(split)])
    except InputError:
        raise
    except Exception as exc:  # a GPU error splitting: the host splits instead
        log.warning("splitting on the GPUs failed (%s); the shuffle goes through Dask", exc)
        client.cancel(split)
        return None
    where = client.who_has(split)
    rank = {w: r for r, w in enumerate(places)}
    holders = [next((rank[w] for w in where.get(s.key, ()) if w in rank), None) for s in split]
    if None in holders:
        return None  # a block held outside the job's workers: let Dask move it
    table = np.array([[r.get(k, 0) for k in range(P)] for r in rows], np.int64)
    d = partitioning.lo.shape[1]
    plan = make_plan(table, holders, [rank[ex.owner(k)] for k in range(P)], len(places), d,
                     frame)
    if not _ranks_fit(client, places, ex.backend, plan, table, d, frame, ex.staged_writes):
        client.cancel(split)
        return None
    key = (client.scheduler.address, tuple(places))
    done, boxes = [], []
    try:
        uid = _uid(client, key, places[0])
        wait_s = nccl.timeout_s()
        # other workers allowed: a rank rerun elsewhere (its worker lost
        # after the exchange) refuses at once, and the job reruns through
        # Dask, rather than waiting for a worker that will not come back
        done += [client.submit(refusing(nccl.exchange_task), uid, wait_s, plan, r,
                               places[r], partitioning,
                               *[split[i] for i in plan.blocks_of(r)],
                               key=ex._key("exchange", r), workers=[places[r]],
                               allow_other_workers=True, pure=False)
                 for r in range(len(places))]
        boxes += [ex.item(done[plan.box_rank[k]], k, box=k) for k in range(P)]
        ex.wait(boxes)
        steps_s = ex.gather([ex.item(d, "seconds") for d in done])
    except InputError:
        raise
    except Exception as exc:
        log.warning("the NCCL exchange failed (%s); the shuffle goes through Dask", exc)
        client.cancel(done + boxes + split)
        _forget(client, key, places)
        return None
    log.info("NCCL exchange, seconds per rank: %s",
             [{k: round(v, 3) for k, v in s.items()} for s in steps_s])
    return boxes, plan.moved_bytes, "nccl", steps_s


def read_on_device(client, src, workers: list, P: int, min_samples: int, backend: str,
                   token: str, staged: bool = False):
    """The job's one block: the whole snapshot read onto the GPU of its one
    worker (a future of ``steps.Block``, in a list), when the job will keep
    its boxes there (``one_device``) and they fit it; else None (the
    blocks are read into host memory, ``read_blocks``).

    The read is then the one-GPU path's (pinned buffers, the copies
    overlapping the reads), and the split starts from device memory.
    """
    from ..io.source import ArrayPoints, DaskPoints

    if (len(workers) != 1 or P < 2 or min_samples > 1 or backend == "cpu"
            or nccl.exchange_mode() == "dask" or isinstance(src, (ArrayPoints, DaskPoints))):
        return None
    place = workers[0]
    if not _boxes_fit(client, place, backend, src.n, src.d, src.compute_dtype, P, staged):
        return None
    return [client.submit(refusing(stage_task), src, key=f"emst-part-{token}-read-0",
                          workers=[place], allow_other_workers=True, pure=False)]


def _boxes_fit(client, place, backend, n: int, d: int, dtype, P: int, staged: bool) -> bool:
    """Whether the GPU of worker ``place`` holds P boxes of n points for
    the whole job (``sizing.device_boxes_fit``; ``staged``: the job's
    writes move a box's edges to host memory before the next box); False
    where it has none or cannot be asked (gone meanwhile: the host path
    copes)."""
    from ..kernels import device_memory
    from ..partitioned.sizing import device_boxes_fit

    try:
        memory = client.run(device_memory, backend, workers=[place]).get(place)
    except Exception:
        return False
    return device_boxes_fit(n, d, np.dtype(dtype), P, memory, staged)


def _ranks_fit(client, places, backend, plan, table, d: int, dtype, staged: bool) -> bool:
    """Whether every rank's GPU holds its part of the job for the whole
    job (``sizing.rank_boxes_fit``, from the plan's exact row counts;
    ``staged``: the job moves a box's certified edges to host memory
    before its worker's next box); else the shuffle goes through Dask and
    phase 1 takes one box at a time to the device, rather than the GPU
    running out of memory partway."""
    from ..kernels import device_memory
    from ..partitioned.sizing import rank_boxes_fit

    try:
        memory = client.run(device_memory, backend, workers=places)
    except Exception:  # a worker gone meanwhile: the Dask shuffle copes
        return False
    box_rows = table.sum(axis=0)
    short = []
    for r, place in enumerate(places):
        read = int(sum(table[i].sum() for i in plan.blocks_of(r)))
        mine = [int(box_rows[k]) for k in plan.boxes_of(r)]
        if not rank_boxes_fit(read, sum(mine), max(mine, default=0), d, np.dtype(dtype),
                              memory.get(place), staged=staged):
            short.append(place)
    if short:
        log.info("the boxes do not fit the GPU of %s for the whole job; the shuffle goes "
                 "through Dask", short)
    return not short


def stage_task(src):
    """``steps.stage_block`` as a task: the whole source on this worker's GPU."""
    from .worker import apply_settings

    apply_settings()
    return steps.stage_block(src)


def one_device(ex, blocks: list, partitioning, frame: str, exponent: int):
    """The shuffle of a job on one GPU worker: (box handles, 0 bytes moved,
    "device", [its seconds]), the blocks split by box on the GPU and every
    box assembled there, where they all fit it for the job
    (``sizing.device_boxes_fit``); else None (the host shuffles).

    Then phase 1 starts from device memory and no point crosses back to
    the host: on the host the blocks, their pieces and the boxes are each
    a copy of the cloud in fresh memory, one task after another.  A split
    or assembly that fails on the GPU (out of memory, say) leaves the
    shuffle to the host, with a warning.
    """
    client, place = ex.client, ex.places[0]
    P = partitioning.n_boxes
    n = sum(ex.gather([ex.submit(steps.block_rows, b, name=f"rows-{i}")
                       for i, b in enumerate(blocks)]))
    if not _boxes_fit(client, place, ex.backend, n, partitioning.lo.shape[1], frame, P,
                      ex.staged_writes):
        return None
    split = [client.submit(refusing(nccl.split_task), b, partitioning, frame, exponent,
                           key=ex._key(f"dsplit-{i}", None), workers=[place],
                           allow_other_workers=True, pure=False)
             for i, b in enumerate(blocks)]
    done, boxes = [], []
    try:
        done.append(client.submit(refusing(assemble_task), partitioning, *split,
                                  key=ex._key("assemble", 0), workers=[place],
                                  allow_other_workers=True, pure=False))
        boxes += [ex.item(done[0], k, box=k) for k in range(P)]
        ex.wait(boxes)
        steps_s = ex.gather([ex.item(done[0], "seconds")])
    except InputError:
        raise
    except Exception as exc:
        log.warning("assembling the boxes on the GPU failed (%s); the host shuffles instead",
                    exc)
        client.cancel(done + boxes + split)
        return None
    return boxes, 0, "device", steps_s


def assemble_task(partitioning, *splits):
    """Every box on this worker's GPU from the blocks' device pieces (block
    order): {box: Box}, and under "seconds" the wall seconds it took."""
    import time

    from ..kernels import get_kernels
    from ..partitioned.exchange import assemble_boxes
    from .worker import apply_settings

    apply_settings()
    K = get_kernels("cuda")
    t = time.perf_counter()
    boxes = assemble_boxes(list(splits), partitioning, K.xp)
    K.synchronize()
    boxes["seconds"] = {"assemble": time.perf_counter() - t}
    return boxes


def _uid(client, key, first):
    """The communicator id for ``key``'s workers, made on the first (rank 0)."""
    with _LOCK:
        uid = _UIDS.get(key)
    if uid is None:
        uid = client.submit(nccl.unique_id, workers=[first], allow_other_workers=False,
                            pure=False).result()
        with _LOCK:
            _UIDS[key] = uid
    return uid


def _forget(client, key, places):
    """Drop a failed communicator on the client and on the workers left."""
    with _LOCK:
        uid = _UIDS.pop(key, None)
    if uid is None:
        return
    try:
        client.run(nccl.forget, uid, workers=places, on_error="ignore")
    except Exception:  # pragma: no cover - the workers may be gone
        pass
