"""SQL over a release: a sandboxed, read-only DuckDB connection with one view per table.

The public surface is :func:`connect`, :func:`sql`, :class:`Query`, :class:`SqlResult` and
:class:`SqlError`; :mod:`dgtraces.query.engine` (statement guard, limits, results) and
:mod:`dgtraces.query.sandbox` (sealed file copies, locked DuckDB configuration) are the
modules behind it. Importing this package loads neither DuckDB nor pandas.
"""

from dgtraces.query.engine import Query, QueryLimitError, SqlError, SqlResult, connect, sql

__all__ = ["Query", "QueryLimitError", "SqlError", "SqlResult", "connect", "sql"]
