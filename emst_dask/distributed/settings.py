"""The package's dask.config settings that take one of a few words."""
from __future__ import annotations


def choice(key: str, choices: tuple, default: str = "auto") -> str:
    """The setting ``key`` in lower case, one of ``choices`` (str), or
    ``default`` where it is not set; a ValueError naming the setting and
    the words it takes otherwise."""
    import dask.config

    mode = str(dask.config.get(key, default)).lower()
    if mode not in choices:
        words = ", ".join(f"'{c}'" for c in choices[:-1]) + f" or '{choices[-1]}'"
        raise ValueError(f"dask config {key} must be {words}, got {mode!r}")
    return mode
