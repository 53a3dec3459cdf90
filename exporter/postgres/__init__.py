"""Postgres as a source of chunk and citation records: the store read where it lives.

An adapter at the edge (psycopg, a server-side cursor in one read-only transaction), behind
the same :class:`~exporter.sources.ChunkSource` protocol as a JSON Lines file: it yields each
row as the bytes of one chunk record, and the decoder bounds and validates it as it would a
line. psycopg is an optional dependency (the ``postgres`` extra), imported only when a sweep
names a database.
"""

from exporter.postgres.chunks import PostgresChunks
from exporter.postgres.citations import PostgresCitations

__all__ = ["PostgresChunks", "PostgresCitations"]
