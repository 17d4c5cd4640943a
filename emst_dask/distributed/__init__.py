"""Layer 4, the Dask service: jobs on workers (``service``, ``job``),
batches (``batch``), the partitioned driver (``partitioned``), clients and
the embedded cluster (``client``, ``cluster``), worker set-up (``worker``)
and failures in the user's terms (``faults``).  No algorithm lives here:
workers call the engine's in-memory core and the partitioned steps."""
