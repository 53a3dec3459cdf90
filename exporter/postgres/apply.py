"""``apply`` on a citations table in Postgres: optimistic, in batches, audited, revertible.

The table is the one the sweep reads citations from, through the same mapping
(:class:`~exporter.config.postgres.CitationTable`: a table, its columns renamed by field). Each
batch is one transaction: its rows are locked (``SELECT ... FOR UPDATE``), each change is
decided against the row as it is (:func:`~exporter.pipeline.repairs.decide`: applied, already
applied, or a conflict left alone), and every change made is written to the audit table with
the row's values before and after, so a crash or a kill leaves whole batches applied or not,
and ``revert`` can put back what a sweep changed where the rows still hold what it wrote. A dry
run reads the same way and writes nothing.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import psycopg
from psycopg import sql

from exporter.config.postgres import CitationTable, redacted_uri
from exporter.errors import InputError
from exporter.pipeline.repairs import MARK_FIELDS, Change, Held, Tally, decide, written
from exporter.postgres.reading import connect, one_line

__all__ = ["DEFAULT_AUDIT_TABLE", "PostgresTarget"]

DEFAULT_AUDIT_TABLE = "citation_apply_audit"
# what a mark column must be for the value apply writes to read back the same (PostgreSQL's
# type oids: boolean; text, varchar; timestamptz, timestamp)
_MARK_TYPES = {
    "degraded": ("boolean", {16}),
    "dropped": ("boolean", {16}),
    "suppressed": ("boolean", {16}),
    "pinned_version": ("text", {25, 1043}),
    "repair_sweep": ("text", {25, 1043}),
    "repaired_at": ("timestamptz", {1184, 1114}),
}
BATCH = 500
_AUDIT_DDL = """CREATE TABLE IF NOT EXISTS {audit} (
  id bigserial PRIMARY KEY,
  sweep text NOT NULL,
  target_table text NOT NULL,
  citation_id text NOT NULL,
  action text NOT NULL,
  before jsonb NOT NULL,
  after jsonb NOT NULL,
  applied_at timestamptz NOT NULL DEFAULT now(),
  reverted_at timestamptz
)"""


class PostgresTarget:
    """A citations table that ``apply`` changes (with ``commit``) or only reads (a dry run)."""

    def __init__(
        self, uri: str, mapping: CitationTable, audit_table: str = DEFAULT_AUDIT_TABLE
    ) -> None:
        if mapping.table is None:
            raise InputError("apply writes through a table: the mapping names a query")
        self._uri = uri
        self.name = redacted_uri(uri)
        self.table = mapping.table
        self._columns = dict(mapping.columns)
        self._audit = audit_table
        self._split_span = False
        self._present: list[str] = []  # the mark fields the table has columns for

    def _column(self, field_name: str) -> str:
        return self._columns.get(field_name, field_name)

    def _check_columns(self, connection: psycopg.Connection[Any], fields: set[str]) -> None:
        found = connection.execute("SELECT to_regclass(%s)", (self.table,)).fetchone()
        if found is None or found[0] is None:
            raise InputError(f"{self.name}: no table {self.table}")
        with connection.cursor() as cursor:
            cursor.execute(sql.SQL("SELECT * FROM {} LIMIT 0").format(self._table()))
            described = {column.name: column.type_code for column in cursor.description or ()}
        columns = set(described)
        wrong = [
            f"{name} ({self._column(name)} must be {kind})"
            for name, (kind, oids) in _MARK_TYPES.items()
            if self._column(name) in described and described[self._column(name)] not in oids
        ]
        if wrong:
            raise InputError(
                f"{self.name}: table {self.table}: {', '.join(wrong)}, as the migration in "
                "docs/apply.md makes them"
            )
        self._split_span = (
            self._column("chunk_span") not in columns
            and {
                self._column("chunk_start"),
                self._column("chunk_end"),
            }
            <= columns
        )
        self._present = [m for m in MARK_FIELDS if self._column(m) in columns]
        needed = {"citation_id", "chunk_id", "doc_version", "quote", *fields} - {"chunk_span"}
        lacking = sorted(f for f in needed if self._column(f) not in columns)
        if not self._split_span and self._column("chunk_span") not in columns:
            lacking.append("chunk_span")
        if lacking:
            names = ", ".join(f"{f} ({self._column(f)})" for f in lacking)
            raise InputError(
                f"{self.name}: table {self.table} has no column for {names}: add them with the "
                "migration in docs/apply.md, or map them in the --citations-mapping file"
            )

    def _table(self) -> sql.Identifier:
        return sql.Identifier(*self.table.split(".", 1))

    def _audit_table(self) -> sql.Identifier:
        return sql.Identifier(*self._audit.split(".", 1))

    def _span_columns(self) -> list[str]:
        if self._split_span:
            return [self._column("chunk_start"), self._column("chunk_end")]
        return [self._column("chunk_span")]

    def apply(
        self, changes: Sequence[Change], tally: Tally, *, sweep: str, now: str, commit: bool
    ) -> Tally:
        """Decide (and with ``commit`` make) every change, a transaction a batch; a batch the
        server refuses is InputError in one line (the batches before it stay committed)."""
        try:
            return self._apply(changes, tally, sweep=sweep, now=now, commit=commit)
        except psycopg.Error as exc:
            raise InputError(f"{self.name} {self.table}: {one_line(exc)}") from None

    def _apply(
        self, changes: Sequence[Change], tally: Tally, *, sweep: str, now: str, commit: bool
    ) -> Tally:
        marks = {name for change in changes for name in change.after} | {
            "repair_sweep",
            "repaired_at",
        }
        with self._connected() as connection:
            # a dry run checks what the commit will need, so that it can promise it
            self._check_columns(connection, marks)
            if commit:
                connection.execute(sql.SQL(_AUDIT_DDL).format(audit=self._audit_table()))
                connection.execute(
                    sql.SQL(
                        "ALTER TABLE {} ADD COLUMN IF NOT EXISTS target_table text NOT NULL "
                        "DEFAULT ''"
                    ).format(self._audit_table())
                )
            else:
                connection.read_only = True  # a dry run can write nothing
            for batch in _batches(changes):
                with connection.transaction():
                    held = self._rows(connection, [c.citation_id for c in batch], lock=commit)
                    writes = _Writes()
                    for change in batch:
                        if change.citation_id not in held:
                            tally.missing(change.citation_id)
                            continue
                        row = held[change.citation_id]
                        # two rows of one id: which the sweep saw is unknown, so neither
                        decision = "conflict" if row is None else decide(change, row)
                        tally.decided(change, decision)
                        if decision == "apply" and commit and row is not None:
                            after = written(change, sweep, now)
                            before = {name: _plain(_field(row, name)) for name in after}
                            self._update(writes, change.citation_id, after)
                            writes.audit.append(
                                (sweep, self.table, change.citation_id, change.action,
                                 json.dumps(before), json.dumps(after))
                            )  # fmt: skip
                    self._flush(connection, writes)
        return tally

    def revert(self, sweep: str, tally: Tally, *, commit: bool) -> Tally:
        """Put back what ``sweep`` changed, where rows still hold what it wrote."""
        try:
            return self._revert(sweep, tally, commit=commit)
        except psycopg.Error as exc:
            raise InputError(f"{self.name} {self.table}: {one_line(exc)}") from None

    def _revert(self, sweep: str, tally: Tally, *, commit: bool) -> Tally:
        with self._connected() as connection:
            self._check_columns(connection, set())
            exists = connection.execute("SELECT to_regclass(%s)", (self._audit,)).fetchone()
            if exists is None or exists[0] is None:
                raise InputError(f"{self.name}: no audit table {self._audit}: nothing applied")
            entries = connection.execute(
                sql.SQL(
                    "SELECT id, citation_id, action, before, after FROM {} WHERE sweep = %s "
                    "AND target_table = %s AND reverted_at IS NULL ORDER BY id DESC"
                ).format(self._audit_table()),
                (sweep, self.table),
            ).fetchall()
            if not commit:
                connection.read_only = True
            for start in range(0, len(entries), BATCH):
                part = entries[start : start + BATCH]
                with connection.transaction():
                    held = self._rows(connection, [e[1] for e in part], lock=commit)
                    writes = _Writes()
                    for entry_id, citation_id, action, before, after in part:
                        row = held.get(citation_id)
                        key = (f"revert {action}", "conflict")
                        if row is None or not _holds(row, after):
                            tally.decisions[key] = tally.decisions.get(key, 0) + 1
                            continue
                        key = (f"revert {action}", "apply")
                        tally.decisions[key] = tally.decisions.get(key, 0) + 1
                        if commit:
                            self._update(writes, citation_id, before)
                            writes.reverted.append((entry_id,))
                    self._flush(connection, writes)
        return tally

    def _connected(self) -> psycopg.Connection[Any]:
        # autocommit: each batch's transaction() is a transaction of its own
        return connect(self._uri, InputError, autocommit=True)

    def _rows(
        self, connection: psycopg.Connection[Any], keys: list[str], *, lock: bool
    ) -> dict[str, Held | None]:
        present = self._present
        columns = [
            self._column("citation_id"),
            self._column("chunk_id"),
            *self._span_columns(),
            self._column("doc_version"),
            self._column("quote"),
            *(self._column(m) for m in present),
        ]
        statement = sql.SQL("SELECT {} FROM {} WHERE {}::text = ANY(%s){}").format(
            sql.SQL(", ").join(sql.Identifier(c) for c in columns),
            self._table(),
            sql.Identifier(self._column("citation_id")),
            sql.SQL(" FOR UPDATE" if lock else ""),
        )
        held: dict[str, Held | None] = {}  # None: more rows than one hold that id
        for row in connection.execute(statement, (keys,)):
            values = list(row)
            key, chunk_id = values[0], values[1]
            if self._split_span:
                span: Any = [values[2], values[3]]
                rest = values[4:]
            else:
                span, rest = values[2], values[3:]
            doc_version, quote, *mark_values = rest
            if str(key) in held:
                held[str(key)] = None
                continue
            held[str(key)] = Held(
                chunk_id, span, doc_version, quote, dict(zip(present, mark_values, strict=True))
            )
        return held

    def _update(self, writes: _Writes, citation_id: str, values: dict[str, Any]) -> None:
        """Queue the update of one row to ``values`` (by field): one statement per shape."""
        columns: list[str] = []
        params: list[Any] = []
        for name, value in values.items():
            if name == "chunk_span" and self._split_span:
                start, end = value if value is not None else (None, None)
                columns += self._span_columns()
                params += [start, end]
                continue
            columns.append(self._column(name))
            params.append(value)
        writes.updates.setdefault(tuple(columns), []).append((*params, citation_id))

    def _flush(self, connection: psycopg.Connection[Any], writes: _Writes) -> None:
        """Write a batch's queued changes: each statement once, for all its rows."""
        with connection.cursor() as cursor:
            for columns, rows in writes.updates.items():
                statement = sql.SQL("UPDATE {} SET {} WHERE {} = %s").format(
                    self._table(),
                    sql.SQL(", ").join(
                        sql.SQL("{} = %s").format(sql.Identifier(c)) for c in columns
                    ),
                    sql.Identifier(self._column("citation_id")),
                )
                cursor.executemany(statement, rows)
            if writes.audit:
                cursor.executemany(
                    sql.SQL(
                        "INSERT INTO {} (sweep, target_table, citation_id, action, before, "
                        "after) VALUES (%s, %s, %s, %s, %s, %s)"
                    ).format(self._audit_table()),
                    writes.audit,
                )
            if writes.reverted:
                cursor.executemany(
                    sql.SQL("UPDATE {} SET reverted_at = now() WHERE id = %s").format(
                        self._audit_table()
                    ),
                    writes.reverted,
                )


@dataclass(slots=True)
class _Writes:
    """One batch's changes, queued to be written together at its end."""

    updates: dict[tuple[str, ...], list[tuple[Any, ...]]] = field(default_factory=dict)
    audit: list[tuple[Any, ...]] = field(default_factory=list)
    reverted: list[tuple[Any, ...]] = field(default_factory=list)


def _field(row: Held, name: str) -> Any:
    if name == "chunk_id":
        return row.chunk_id
    if name == "chunk_span":
        return row.chunk_span
    return row.marks.get(name)


def _plain(value: Any) -> Any:
    if isinstance(value, tuple):
        return list(value)
    if hasattr(value, "isoformat"):
        return value.isoformat()
    return value


def _holds(row: Held, values: dict[str, Any]) -> bool:
    """Whether ``row`` still holds what a change wrote (its time aside: a timestamp column
    gives it back in its own format)."""
    for name, value in values.items():
        if name == "repaired_at":
            continue
        held = _field(row, name)
        if name == "chunk_span":
            held = list(held) if held is not None else None
        if held != value:
            return False
    return True


def _batches(changes: Sequence[Change]) -> Iterator[Sequence[Change]]:
    for start in range(0, len(changes), BATCH):
        yield changes[start : start + BATCH]
