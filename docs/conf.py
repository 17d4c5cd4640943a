"""Sphinx configuration of the emst-dask documentation.

Built with warnings as errors:  sphinx-build -W -b html docs docs/_build/html
"""
import os
import sys

sys.path.insert(0, os.path.abspath(".."))

import emst_dask  # noqa: E402

project = "emst-dask"
author = "the emst-dask authors"
copyright = "the emst-dask authors"
release = version = emst_dask.__version__

extensions = [
    "myst_parser",
    "sphinx.ext.autodoc",
    "sphinx.ext.autosummary",
    "sphinx.ext.napoleon",
    "sphinx.ext.viewcode",
]

source_suffix = {".rst": "restructuredtext", ".md": "markdown"}
exclude_patterns = ["_build", "Thumbs.db", ".DS_Store"]

# numpydoc-style docstrings (Parameters / Returns / Raises sections)
napoleon_numpy_docstring = True
napoleon_google_docstring = False
napoleon_use_rtype = False
napoleon_use_ivar = True  # an Attributes section beside the properties it names
autosummary_generate = True
autodoc_default_options = {"members": True, "show-inheritance": True}
autodoc_member_order = "bysource"
autodoc_typehints = "none"  # the docstrings say the types, shapes and dtypes
# heavy or optional imports the API pages do not need at build time
autodoc_mock_imports = ["cupy", "dask_cuda"]

myst_heading_anchors = 3
myst_enable_extensions = ["colon_fence"]

html_theme = "furo"
html_title = f"emst-dask {release}"
html_static_path = []
