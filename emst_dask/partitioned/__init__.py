"""The exact partitioned EMST: one cloud split into spatial boxes, solved
box by box and joined exactly (``algorithm``), in named phases: split into
boxes, shuffle, core distances, phase 1, phase 2; the output is the
driver's.  ``local.emst_partitioned`` runs it in this process; the Dask
driver is ``emst_dask.distributed.partitioned``."""
from .local import emst_partitioned
from .report import PartitionReport

__all__ = ["emst_partitioned", "PartitionReport"]
