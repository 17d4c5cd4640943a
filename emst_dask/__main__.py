"""``python -m emst_dask`` is the ``emst-dask`` command."""
from .cli import main

main()
