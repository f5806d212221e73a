"""One SQLite transaction, shared by the master's registry and the agent's checkpoint.

Invariant: the block runs between ``BEGIN IMMEDIATE`` (the write lock is taken at once, so a
commit never fails for a lock taken late) and ``COMMIT``; if the block raises, ``ROLLBACK`` and
the error propagates, so the file holds whole transactions only. The connection must be in
autocommit mode (``isolation_level=None``) so that Python's sqlite3 opens no transactions of
its own.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["transaction"]


@contextmanager
def transaction(connection: sqlite3.Connection) -> Iterator[None]:
    """``with transaction(db): ...`` commits the block's statements together, or none."""
    connection.execute("BEGIN IMMEDIATE")
    try:
        yield
    except BaseException:
        connection.execute("ROLLBACK")
        raise
    connection.execute("COMMIT")
