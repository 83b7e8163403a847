"""The single version source of the dgtraces package (pyproject reads it dynamically)."""

__version__ = "0.1.0"
