"""The package's version, in a module of its own: the stores record it, and
they may not import the package's face (which imports the API above them)."""

__version__ = "0.2.0"
