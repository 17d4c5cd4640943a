"""``python -m emst_dask.cli``."""
from . import main

main()
