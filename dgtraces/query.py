"""Sandboxed, read-only DuckDB SQL over one release's Parquet files.

Design:

* **Out-of-core views.** Each table of the release is a *view* over its Parquet file, so
  DuckDB scans only the columns and row groups a query needs and nothing is loaded up front;
  the same code serves a 1 MB release and a 100 GB one. Materialising tables instead would
  copy the release into memory on every connect.
* **File sandbox.** Before any user SQL runs we set ``allowed_paths`` to exactly the
  release's Parquet files, then ``enable_external_access=false`` (no other file, no other
  release, no URL, no ``COPY ... TO``, ``EXPORT``, ``ATTACH``, ``INSTALL``/``LOAD``), then
  ``lock_configuration=true`` (no ``SET``/``RESET``/``PRAGMA x=`` can undo any of this).
  Extension auto-install/auto-load are off from start-up. DuckDB's ``allowed_paths``
  grants write as well as read access to those files (there is no read-only variant), so
  what keeps ``COPY ... TO`` a release file out of :class:`Query` is the statement guard
  below, which also looks inside ``EXPLAIN [ANALYZE]`` (that runs what it explains).
* **Read-only statements.** The catalog is a private in-memory database: a read-only
  file-backed catalog (write views to a temp DuckDB file, reopen it ``read_only``) was
  measured at 20-40 ms extra per connect on our 2-core machine, which alone would break the
  cold-start budget of ``dgtraces sql``. So :class:`Query` (``dgtraces sql``, :func:`sql`)
  accepts only reading statement types (:data:`READ_STATEMENTS`) and refuses the rest before
  DuckDB sees them. A raw :func:`connect` connection has no statement guard: it is for SQL
  you wrote yourself. It can ``CREATE``/``DROP`` objects in its own in-memory catalog
  (invisible to anyone else, gone on close) and, through ``COPY ... TO`` or a relation's
  ``write_*``, overwrite the release's own files (no other file); ``dgtraces verify``
  detects any such change. Run SQL you did not write through :class:`Query` /
  ``dgtraces sql``.

Every DuckDB failure becomes :class:`SqlError` (code ``SQL``) carrying DuckDB's own message,
which includes the ``LINE n:`` excerpt and caret for parse and binder errors. Nothing here
prints; results are returned as :class:`SqlResult` or streamed as Arrow batches.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from .errors import Code, DgtracesError
from .values import whole_number

if TYPE_CHECKING:  # pragma: no cover
    import duckdb

STARTUP_CONFIG = {
    "autoinstall_known_extensions": False,
    "autoload_known_extensions": False,
    "allow_community_extensions": False,
}
# SELECT covers DESCRIBE/SHOW/SUMMARIZE/VALUES/FROM; MULTI is PIVOT; PRAGMA without "=".
READ_STATEMENTS = frozenset({"SELECT", "EXPLAIN", "PRAGMA", "CALL", "MULTI"})
SANDBOX_HINT = ("queries may only read the release's tables; write results with "
                "`dgtraces sql ... --format csv|json|parquet --out FILE`")


class SqlError(DgtracesError):
    code = Code.SQL


@dataclass
class Release:
    """A resolved release: its version, folder and table name -> Parquet path."""

    version: str
    path: Path
    files: dict[str, Path] = field(default_factory=dict)


def resolve(version: str | None = None, root=None) -> Release:
    from . import store

    version = store.latest(root) if version is None else store.norm_version(version)
    path = store.release_path(version, root).resolve()
    files = store.table_paths(version, root)  # INTEGRITY if the manifest or a file is bad
    return Release(version, path, {name: path / p.name for name, p in files.items()})


def _quote_ident(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _quote_str(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def _wrap(exc: Exception) -> SqlError:
    import duckdb

    text = str(exc)
    refused = isinstance(exc, duckdb.PermissionException) or "configuration has been locked" \
        in text
    msg = ("refused by the sandbox: " if refused else "query failed: ") + text
    return SqlError(msg, hint=SANDBOX_HINT if refused else None)


def connect(version: str | None = None, root=None) -> "duckdb.DuckDBPyConnection":
    """A read-only, sandboxed DuckDB connection with one view per table of a release.

    ``version`` defaults to the latest release. The connection can read only that release's
    Parquet files. It has no statement guard (SQL you wrote yourself; for anyone else's use
    :class:`Query`): see the module docstring for what is refused and what is not.
    """
    return _connect_release(resolve(version, root))


def _connect_release(rel: Release) -> "duckdb.DuckDBPyConnection":
    import duckdb

    con = duckdb.connect(":memory:", config=dict(STARTUP_CONFIG))
    try:
        for name, file in rel.files.items():
            con.execute(f"CREATE VIEW {_quote_ident(name)} AS SELECT * FROM "
                        f"read_parquet({_quote_str(str(file))})")
        allowed = ", ".join(_quote_str(str(f)) for f in rel.files.values())
        con.execute(f"SET allowed_paths = [{allowed}]")
        con.execute("SET enable_external_access = false")
        con.execute("SET lock_configuration = true")
    except BaseException:
        con.close()
        raise
    return con


def check_read_only(con: "duckdb.DuckDBPyConnection", sql: str) -> None:
    """Raise :class:`SqlError` unless every statement of ``sql`` only reads."""
    import duckdb

    try:
        statements = con.extract_statements(sql)
    except duckdb.Error as exc:
        raise _wrap(exc) from None
    if not statements:
        raise DgtracesError("empty query", code=Code.BAD_INPUT)
    for st in statements:
        kind = str(st.type).rsplit(".", 1)[-1]
        if kind not in READ_STATEMENTS:
            raise SqlError(f"refused by the sandbox: {kind} statements are not allowed; the "
                           f"connection is read-only (allowed: "
                           f"{', '.join(sorted(READ_STATEMENTS))})", hint=SANDBOX_HINT)
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
            inner = con.extract_statements(text[start:])
        except duckdb.Error:
            continue
        for st in inner:
            kind = str(st.type).rsplit(".", 1)[-1]
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
    """One user query on a sandboxed connection. It runs when rows are asked for: as row
    tuples (:meth:`fetch`, DuckDB's cursor, no pyarrow) or streamed as Arrow batches
    (:meth:`arrow_batches`, :meth:`batches`) for writing files of any size."""

    def __init__(self, sql: str, version: str | None = None, root=None) -> None:
        if not isinstance(sql, str) or not sql.strip():
            raise DgtracesError("empty query" if isinstance(sql, str) or sql is None else
                                f"a query is text, got {type(sql).__name__}",
                                code=Code.BAD_INPUT)
        self.sql = sql
        self.release = resolve(version, root)
        self.version = self.release.version
        self.con = _connect_release(self.release)
        try:
            check_read_only(self.con, sql)
        except DgtracesError:
            self.con.close()
            raise
        self.columns: list[str] = []
        self.types: list[str] = []

    def fetch(self, limit: int | None = None) -> SqlResult:
        """At most ``limit`` rows (all when None); ``truncated`` says whether more exist."""
        import duckdb

        if limit is not None:
            limit = whole_number("limit", limit, least=0)
        try:
            cur = self.con.execute(self.sql)
            desc = cur.description or []
            rows = cur.fetchall() if limit is None else cur.fetchmany(limit + 1)
        except duckdb.Error as exc:
            raise _wrap(exc) from None
        self.columns = [d[0] for d in desc]
        self.types = [str(d[1]) for d in desc]
        truncated = limit is not None and len(rows) > limit
        return SqlResult(self.version, self.columns, self.types,
                         rows[:limit] if truncated else rows, truncated)

    def arrow_batches(self, size: int = 100_000):
        """(schema, iterator of pyarrow RecordBatches), streamed from a DuckDB relation."""
        import duckdb

        size = whole_number("size", size)
        try:
            rel = self.con.sql(self.sql)
            if rel is None:
                raise DgtracesError("the statement returns no rows to write",
                                    code=Code.EMPTY)
            self.columns = list(rel.columns)
            self.types = [str(t) for t in rel.types]
            reader = rel.to_arrow_reader(size)
        except duckdb.Error as exc:
            raise _wrap(exc) from None

        def gen():
            try:
                yield from reader
            except duckdb.Error as exc:
                raise _wrap(exc) from None

        return reader.schema, gen()

    def batches(self, size: int = 10_000) -> Iterator[list[tuple]]:
        """Row tuples in batches, streamed through Arrow; runs the query (sets ``columns``)
        before returning."""
        _, batches = self.arrow_batches(size)
        return (list(zip(*(col.to_pylist() for col in b.columns), strict=True)) for b in batches)

    def close(self) -> None:
        self.con.close()

    def __enter__(self) -> "Query":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def sql(query: str, version: str | None = None, root=None,
        limit: int | None = None) -> SqlResult:
    """Run ``query`` against a release in the sandbox and return its rows (at most ``limit``)."""
    with Query(query, version, root) as q:
        return q.fetch(limit)
