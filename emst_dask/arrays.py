"""Where an array lives: one helper for the whole package."""
from __future__ import annotations

import numpy as np


def to_host(a):
    """A numpy array of ``a`` (numpy as it is, cupy copied to the host;
    None stays None)."""
    if a is None or isinstance(a, np.ndarray):
        return a
    return a.get()  # cupy
