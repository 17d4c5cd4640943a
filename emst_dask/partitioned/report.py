"""What a partitioned job did: rounds, bytes moved, seconds per phase."""
from __future__ import annotations

from dataclasses import asdict, dataclass, field


@dataclass
class PartitionReport:
    """What a partitioned job did.

    Attributes
    ----------
    partitions, workers : int
        Boxes, and the places that ran them (workers; 0 in this process).
    rounds : int
        Phase-2 rounds (shell + ghost exchanges).
    exchanges : int
        All communication rounds (shuffle, core-distance ghosts, phase-2
        rounds, output).
    radius : float
        The final phase-2 radius R.
    n_super_vertices, n_certified : int
        After phase 1.
    bytes_moved : dict
        Bytes sent between different places per step.
    shuffle_by : str
        How the shuffle moved the points: "dask" (Dask's comms, piece by
        piece), "nccl" (one exchange between the workers' GPUs), "device"
        (one GPU worker: split and assembled on its GPU) or "none" (in
        this process).
    shuffle_steps : list of dict
        With "nccl": per worker, the seconds of the exchange's steps (pack
        on the host, to the device, the exchange, the boxes assembled).
    seconds : dict
        Wall time per phase on the driver.
    boxes : list of dict
        Per box: points, worker, certified edges, super-vertices, phase-1
        seconds and steps, backend.
    """

    partitions: int
    workers: int
    rounds: int = 0
    exchanges: int = 0
    radius: float = 0.0
    n_super_vertices: int = 0
    n_certified: int = 0
    bytes_moved: dict = field(default_factory=dict)
    shuffle_by: str = "none"
    shuffle_steps: list = field(default_factory=list)
    seconds: dict = field(default_factory=dict)
    boxes: list = field(default_factory=list)

    @property
    def total_bytes_moved(self) -> int:
        """Sum of ``bytes_moved`` over the steps."""
        return int(sum(self.bytes_moved.values()))

    def as_dict(self) -> dict:
        """A plain dict (JSON-ready), with ``total_bytes_moved``."""
        out = asdict(self)
        out["total_bytes_moved"] = self.total_bytes_moved
        return out
