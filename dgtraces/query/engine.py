"""Sandboxed, read-only DuckDB SQL over one release's Parquet files, with limits.

Design:

* **Out-of-core views.** Each table of the release is a *view* over its list of Parquet
  shards (``read_parquet([...])``, see :mod:`dgtraces.store.shards`), so DuckDB scans only the
  columns and row groups a query needs.
* **The connection** (:mod:`dgtraces.query.sandbox`): the only readable paths are the release's
  table files, checked against the manifest's sha256 (INTEGRITY otherwise), served from
  sealed private copies that nothing can write (Linux, releases up to 256 MiB); no other
  file, temp directory, URL, extension or secret; a memory limit; locked configuration.
* **The statement guard** (:func:`check_read_only`): an allow-list of DuckDB statement
  types (``st.type.name``) that can only read: ``SELECT`` (also ``FROM``, ``VALUES``,
  ``WITH``, ``DESCRIBE``, ``SHOW``, ``SUMMARIZE``, ``UNPIVOT``), ``MULTI`` (what DuckDB makes
  of ``PIVOT``: an in-memory enum type plus a ``SELECT``) and ``EXPLAIN`` of those (``EXPLAIN
  ANALYZE`` runs what it explains, so that is checked too). Everything else is refused
  before DuckDB runs it, whatever DuckDB calls it: ``PRAGMA`` (DuckDB files ``IMPORT
  DATABASE`` and ``COPY FROM DATABASE`` there), ``CALL``, ``COPY``, ``EXPORT``, ``ATTACH``,
  ``SET``, ``LOAD``/``INSTALL``, ``CREATE`` (macros, secrets, tables), ``PREPARE``, and any
  statement type this DuckDB version cannot name.
* **Limits** (:class:`Query`): a statement time limit (a timer thread calls DuckDB's
  ``interrupt``) and the memory limit; hitting either is :class:`SqlError` with code
  ``QUERY_LIMIT``. Ctrl-C interrupts DuckDB and re-raises ``KeyboardInterrupt``.

A raw :func:`connect` connection has the same file sandbox and memory limit but no statement
guard and no time limit: it is for SQL you wrote yourself. Every DuckDB failure becomes
:class:`SqlError` (code ``SQL``) carrying DuckDB's own message, which includes the ``LINE n:``
excerpt and caret for parse and binder errors. Nothing here prints.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from dgtraces.errors import Code, DgtracesError, Failure
from dgtraces.query.sandbox import (
    DEFAULT_MEMORY_LIMIT_MIB,
    DEFAULT_TIMEOUT_S,
    check_limits,
    open_connection,
)
from dgtraces.values import whole_number

if TYPE_CHECKING:  # pragma: no cover
    import duckdb

    from dgtraces.store.release import Release as StoreRelease

# DuckDB statement types (``st.type.name``) that only read. An allow-list: a type added by a
# later DuckDB version is refused until someone checks it and adds it here.
READ_STATEMENTS = frozenset({"SELECT", "EXPLAIN", "MULTI"})
# what a user may write, as the refusal lists it (MULTI is DuckDB's internal type of PIVOT)
ALLOWED_SHOWN = "SELECT, WITH, DESCRIBE, SHOW, SUMMARIZE, PIVOT, UNPIVOT, EXPLAIN of those"
SANDBOX_HINT = ("queries may only read the release's tables (SELECT, EXPLAIN, PIVOT; "
                "pragma_* functions instead of PRAGMA); write results with "
                "`dgtraces sql ... --format csv|json|parquet --out FILE`")
LIMIT_HINT = "raise the limits: `dgtraces sql --timeout-s S --memory-limit-mib M`, " \
    "or Query(..., timeout_s=, memory_limit_mib=)"


class SqlError(DgtracesError):
    code = Code.SQL


class QueryLimitError(SqlError):
    """A query ran past its time or memory limit."""

    code = Code.QUERY_LIMIT


@dataclass
class Release:
    """A resolved release as the sandbox reads it: its version, folder (symlinks resolved)
    and manifest table entries (see :class:`dgtraces.store.release.Release`, the handle)."""

    version: str
    path: Path
    entries: dict[str, dict] = field(default_factory=dict)


def resolve(version: "StoreRelease | str | None", root) -> Release:
    """The release ``version`` (an open :class:`dgtraces.store.release.Release`, or a version
    of the store at ``root``, default the default store; ``None``: the latest) as the sandbox
    reads it."""
    from dgtraces.store import manifest as store
    from dgtraces.store.release import Release as Handle

    if isinstance(version, Handle):
        path, entries = version.path.resolve(), version.entries
    else:
        path = store.release_path(version, root).resolve()
        entries = store.manifest_at(path)["tables"]  # INTEGRITY if missing or malformed
    store.checked_files(path, entries)  # INTEGRITY if a file (a shard) is missing
    return Release(path.name[1:], path, dict(entries))


def _wrap(exc: Exception) -> SqlError:
    import duckdb

    text = str(exc)
    if isinstance(exc, duckdb.OutOfMemoryException):
        return QueryLimitError(f"the query needs more than its memory limit: {text}",
                               hint=LIMIT_HINT)
    refused = isinstance(exc, duckdb.PermissionException) or "configuration has been locked" \
        in text
    msg = ("refused by the sandbox: " if refused else "query failed: ") + text
    return SqlError(msg, hint=SANDBOX_HINT if refused else None)


def _over_memory(limit_mib: int) -> QueryLimitError:
    return QueryLimitError(f"the query needs more memory than its limit of {limit_mib} MiB "
                           "(lists and strings included)", hint=LIMIT_HINT)


def connect(version: "StoreRelease | str | None" = None, root=None,
            memory_limit_mib: int = DEFAULT_MEMORY_LIMIT_MIB) -> "duckdb.DuckDBPyConnection":
    """A sandboxed DuckDB connection with one view per table of a release (a version of the
    store at ``root``, default the default store and the latest release, or an open
    :class:`dgtraces.store.release.Release` of any store).

    It can read only that release's table files (checked against the manifest) and has a
    memory limit, but no statement guard and no time limit (SQL you wrote yourself; for
    anyone else's use :class:`Query`)."""
    check_limits(DEFAULT_TIMEOUT_S, memory_limit_mib)
    rel = resolve(version, root)
    return open_connection(rel.path, rel.entries, memory_limit_mib)


def _statements(con: "duckdb.DuckDBPyConnection", sql: str) -> list:
    import duckdb

    try:
        return con.extract_statements(sql)
    except duckdb.Error as exc:
        raise _wrap(exc) from None


def _kind(st: Any) -> str:
    """A statement's DuckDB type name; refused if this duckdb's Python enum cannot name it."""
    try:
        return st.type.name
    except ValueError:
        raise SqlError("refused by the sandbox: a statement of a type this DuckDB version "
                       "cannot name", hint=SANDBOX_HINT) from None


def check_read_only(con: "duckdb.DuckDBPyConnection", sql: str) -> None:
    """Raise :class:`SqlError` unless every statement of ``sql`` only reads."""
    statements = _statements(con, sql)
    if not statements:
        raise DgtracesError("empty query", code=Code.BAD_INPUT)
    for st in statements:
        kind = _kind(st)
        if kind not in READ_STATEMENTS:
            raise SqlError(f"refused by the sandbox: {kind} statements are not allowed; the "
                           f"connection is read-only (allowed: {ALLOWED_SHOWN})",
                           hint=SANDBOX_HINT, failures=[Failure(
                               Code.SQL, "statement type not allowed", expected=ALLOWED_SHOWN,
                               found=kind)])
        if kind == "EXPLAIN":  # EXPLAIN ANALYZE runs what it explains: check that too
            _check_explained(con, st.query)


def _check_explained(con: "duckdb.DuckDBPyConnection", text: str) -> None:
    """Check the statement an ``EXPLAIN [ANALYZE] [(options)]`` statement explains. A
    leading parenthesis may open options or a subquery: every reading that parses is
    checked, and a statement no reading can parse is refused."""
    import duckdb

    tokens = [(pos, kind) for pos, kind in duckdb.tokenize(text)
              if kind != duckdb.token_type.comment]
    words = [text[p:].split(None, 1)[0].upper() if text[p:].strip() else ""
             for p, _ in tokens]
    i = 1 + (len(words) > 1 and words[1] == "ANALYZE")  # skip EXPLAIN [ANALYZE]
    starts = [tokens[i][0]] if i < len(tokens) else []
    if i < len(tokens) and text[tokens[i][0]] == "(":  # also try: skip an option list
        depth = 0
        for pos, _ in tokens[i:]:
            depth += {"(": 1, ")": -1}.get(text[pos], 0)
            if depth == 0:
                after = [p for p, _ in tokens if p > pos]
                starts += after[:1]
                break
    checked = 0
    for start in starts:
        try:
            inner = _statements(con, text[start:])
        except SqlError as exc:
            if exc.hint == SANDBOX_HINT:
                raise
            continue
        for st in inner:
            kind = _kind(st)
            if kind not in READ_STATEMENTS:
                raise SqlError(f"refused by the sandbox: EXPLAIN of a {kind} statement (EXPLAIN "
                               f"ANALYZE runs it)", hint=SANDBOX_HINT)
            if kind == "EXPLAIN":
                _check_explained(con, st.query)
            checked += 1
    if not checked:
        raise SqlError("refused by the sandbox: cannot tell what this EXPLAIN explains",
                       hint=SANDBOX_HINT)


@dataclass
class SqlResult:
    """The outcome of one query: column names and DuckDB types, and the fetched rows."""

    version: str
    columns: list[str]
    types: list[str]
    rows: list[tuple]
    truncated: bool = False


class Query:
    """One user query on a sandboxed connection, under a time and a memory limit. It runs
    when rows are asked for: as row tuples (:meth:`fetch`, DuckDB's cursor, no pyarrow) or
    streamed as Arrow batches (:meth:`arrow_batches`, :meth:`batches`) for writing files of
    any size; the time limit covers the whole run, streaming included."""

    def __init__(self, sql: str, version: "StoreRelease | str | None" = None, root=None, *,
                 timeout_s: float = DEFAULT_TIMEOUT_S,
                 memory_limit_mib: int = DEFAULT_MEMORY_LIMIT_MIB) -> None:
        if not isinstance(sql, str) or not sql.strip():
            raise DgtracesError("empty query" if isinstance(sql, str) or sql is None else
                                f"a query is text, got {type(sql).__name__}",
                                code=Code.BAD_INPUT)
        self.timeout_s, self.memory_limit_mib = check_limits(timeout_s, memory_limit_mib)
        self.sql = sql
        self.release = resolve(version, root)
        self.version = self.release.version
        self.con = open_connection(self.release.path, self.release.entries,
                                   self.memory_limit_mib)
        try:
            check_read_only(self.con, sql)
        except DgtracesError:
            self.con.close()
            raise
        self.columns: list[str] = []
        self.types: list[str] = []
        self._timer: threading.Timer | None = None
        self._expired = False

    def _start_clock(self) -> None:
        import time

        self._started = time.monotonic()

        def expire() -> None:
            self._expired = True
            self.con.interrupt()

        self._timer = threading.Timer(self.timeout_s, expire)
        self._timer.daemon = True
        self._timer.start()

    def check_time(self) -> None:
        """QUERY_LIMIT once the time limit has passed since the query started: for work on
        its result outside DuckDB (the CLI's rendering, #29), which no interrupt reaches."""
        import time

        started = getattr(self, "_started", None)
        if started is not None and time.monotonic() - started > self.timeout_s:
            raise QueryLimitError(f"the query and its output ran past the time limit of "
                                  f"{self.timeout_s:g} s", hint=LIMIT_HINT)

    def _stop_clock(self) -> None:
        if self._timer is not None:
            self._timer.cancel()

    def _translate(self, exc: BaseException) -> BaseException:
        """The error to raise for a DuckDB failure: QUERY_LIMIT for the time or memory
        limit, KeyboardInterrupt for an interrupt that was not the timer's."""
        import duckdb

        if isinstance(exc, duckdb.InterruptException):
            if self._expired:
                return QueryLimitError(f"the query ran past its time limit of {self.timeout_s:g} s "
                                       f"and was stopped", hint=LIMIT_HINT)
            return KeyboardInterrupt()
        return _wrap(exc) if isinstance(exc, duckdb.Error) else exc

    def _timed(self, fn: Callable[[], Any]) -> Any:
        import duckdb

        from dgtraces.query.memcap import capped

        self._start_clock()
        try:
            with capped(self.memory_limit_mib):  # every allocation, lists too (#29 M4)
                return fn()
        except duckdb.Error as exc:
            raise self._translate(exc) from None
        except MemoryError:
            raise _over_memory(self.memory_limit_mib) from None
        except KeyboardInterrupt:
            self.con.interrupt()
            raise
        finally:
            self._stop_clock()

    def fetch(self, limit: int | None = None) -> SqlResult:
        """At most ``limit`` rows (all when None); ``truncated`` says whether more exist."""
        if limit is not None:
            limit = whole_number("limit", limit, least=0)

        def run():
            cur = self.con.execute(self.sql)
            desc = cur.description or []
            return desc, cur.fetchall() if limit is None else cur.fetchmany(limit + 1)

        desc, rows = self._timed(run)
        self.columns = [d[0] for d in desc]
        self.types = [str(d[1]) for d in desc]
        truncated = limit is not None and len(rows) > limit
        return SqlResult(self.version, self.columns, self.types,
                         rows[:limit] if truncated else rows, truncated)

    def arrow_batches(self, size: int = 100_000):
        """(schema, iterator of pyarrow RecordBatches), streamed from a DuckDB relation."""
        import duckdb

        from dgtraces.query.memcap import capped

        size = whole_number("size", size)
        self._start_clock()
        try:
            with capped(self.memory_limit_mib):
                rel = self.con.sql(self.sql)
                if rel is None:
                    raise DgtracesError("the statement returns no rows to write",
                                        code=Code.EMPTY)
                self.columns = list(rel.columns)
                self.types = [str(t) for t in rel.types]
                reader = rel.to_arrow_reader(size)
        except MemoryError:
            self._stop_clock()
            raise _over_memory(self.memory_limit_mib) from None
        except duckdb.Error as exc:
            self._stop_clock()
            raise self._translate(exc) from None
        except BaseException:
            self._stop_clock()
            raise

        def gen():
            from dgtraces.query.memcap import capped

            try:
                while True:
                    with capped(self.memory_limit_mib):  # each batch as it is made
                        batch = next(reader, None)
                    if batch is None:
                        return
                    yield batch
            except MemoryError:
                raise _over_memory(self.memory_limit_mib) from None
            except duckdb.Error as exc:
                raise self._translate(exc) from None
            except OSError as exc:  # pyarrow's reader wraps DuckDB's errors
                if self._expired:
                    raise self._translate(duckdb.InterruptException(str(exc))) from None
                raise _wrap(duckdb.Error(str(exc))) from None
            except KeyboardInterrupt:
                self.con.interrupt()
                raise
            finally:
                self._stop_clock()

        return reader.schema, gen()

    def batches(self, size: int = 10_000) -> Iterator[list[tuple]]:
        """Row tuples in batches, streamed through Arrow; runs the query (sets ``columns``)
        before returning."""
        _, batches = self.arrow_batches(size)
        return (list(zip(*(col.to_pylist() for col in b.columns), strict=True)) for b in batches)

    def close(self) -> None:
        self._stop_clock()
        self.con.close()

    def __enter__(self) -> "Query":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def sql(query: str, version: "StoreRelease | str | None" = None, root=None,
        limit: int | None = None, *,
        timeout_s: float = DEFAULT_TIMEOUT_S,
        memory_limit_mib: int = DEFAULT_MEMORY_LIMIT_MIB) -> SqlResult:
    """Run ``query`` against a release in the sandbox and return its rows (at most
    ``limit``), within the time and memory limits (``QUERY_LIMIT`` when hit)."""
    with Query(query, version, root, timeout_s=timeout_s,
               memory_limit_mib=memory_limit_mib) as q:
        return q.fetch(limit)
