"""The errors a user can act on.

Everything the package refuses because of what it was given is an
``InputError`` (a ``ValueError``): the points, the source, a parameter.
``OutputError`` is the part of it about where results go.  ``WorkerLost``
is a job whose workers died; ``InputLost`` the part of it where the job's
in-memory points died with them and cannot be recomputed; ``WorkersPaused``
a job whose workers sat paused at their memory limit.  The command line turns each into one
``Error:`` line (``emst_dask.cli.errors``).
"""
from __future__ import annotations


class InputError(ValueError):
    """The point cloud, its source or a parameter cannot be used as given."""


class OutputError(InputError):
    """An output that cannot be written, or that may not be replaced."""


class WorkerLost(RuntimeError):
    """A job whose worker died and that no remaining worker could take over."""


class InputLost(WorkerLost):
    """A job whose in-memory points died with the worker that held them:
    they were sent by a client, not read from a file, and no copy is left
    on the cluster to run the job again."""


class WorkersPaused(WorkerLost):
    """A job whose workers sat paused at their memory limit (Dask runs no
    task on a paused worker) for longer than
    ``emst_dask.jobs.paused-timeout``: it was cancelled, not left waiting."""


class JobCancelled(RuntimeError):
    """A job stopped by ``Job.cancel()`` before it finished."""
