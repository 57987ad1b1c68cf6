"""The stack's demo databases as the application sees them: a small SQL adapter, the demo schema.

The connections are the local stack's ``app`` user on the ``demo`` database, opened with :mod:`cdclake.databases`
(connect and statement timeouts; the session keeps the server's time zone).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from cdclake.databases import open_database, stack_connection
from cdclake.paths import project_home
from cdclake.stack import Stack
from cdclake.stack.config import DEMO_DATABASE


class AppSql:
    """A tiny adapter over a psycopg or PyMySQL autocommit connection: statements, transactions, JSON values.

    Args:
        conn: the connection (autocommit).
        postgres: True for psycopg (PostgreSQL), False for PyMySQL (MariaDB).
    """

    def __init__(self, conn: Any, postgres: bool) -> None:
        self.conn = conn
        self.postgres = postgres

    def execute(self, statement: str, args: Sequence[Any] = ()) -> int:
        """Run one statement; return its row count."""
        if self.postgres:
            return int(self.conn.execute(statement, list(args)).rowcount)
        with self.conn.cursor() as cur:
            return int(cur.execute(statement, list(args)))

    def executemany(self, statement: str, rows: Sequence[Sequence[Any]]) -> None:
        """Run one statement for each row."""
        if self.postgres:
            with self.conn.cursor() as cur:
                cur.executemany(statement, [list(r) for r in rows])
            return
        with self.conn.cursor() as cur:
            cur.executemany(statement, [list(r) for r in rows])

    def scalar(self, statement: str, args: Sequence[Any] = ()) -> Any:
        """The first column of the first row."""
        if self.postgres:
            row = self.conn.execute(statement, list(args)).fetchone()
        else:
            with self.conn.cursor() as cur:
                cur.execute(statement, list(args))
                row = cur.fetchone()
        return row[0] if row else None

    def json(self, value: Any) -> Any:
        """``value`` as a parameter of a JSON column (``jsonb`` in PostgreSQL, ``JSON`` in MariaDB)."""
        import json

        if self.postgres:
            from psycopg.types.json import Jsonb

            return Jsonb(value)
        return json.dumps(value, ensure_ascii=False)

    @contextmanager
    def transaction(self) -> Iterator[None]:
        """One database transaction around the block (rolled back when the block raises)."""
        if self.postgres:
            with self.conn.transaction():
                yield
            return
        self.conn.begin()
        try:
            yield
        except BaseException:
            self.conn.rollback()
            raise
        self.conn.commit()


@contextmanager
def app_sql(stack: Stack, database: str) -> Iterator[AppSql]:
    """An :class:`AppSql` on the ``demo`` database as the stack's ``app`` user (``postgres`` or ``mariadb``).

    Raises:
        SourceDatabaseError: when the stack's database cannot be reached.
    """
    postgres = database == "postgres"
    source = stack_connection(
        "postgresql" if postgres else "mariadb",
        "app",
        DEMO_DATABASE,
        origin=f"local stack {database} (app user)",
        stack=stack,
    )
    with open_database(source, utc=False) as db:
        yield AppSql(db.dbapi, postgres=postgres)


def apply_demo_schema(stack: Stack) -> None:
    """Create the demo tables in both databases (``include/sql/*/demo_schema.sql``, idempotent)."""
    sql_dir = project_home() / "include" / "sql"
    with app_sql(stack, "postgres") as sql:
        sql.conn.execute((sql_dir / "postgres" / "demo_schema.sql").read_text())
    text = (sql_dir / "mariadb" / "demo_schema.sql").read_text()
    statements = [
        s
        for s in text.split(";")
        if s.strip() and not all(line.strip().startswith("--") or not line.strip() for line in s.splitlines())
    ]
    with app_sql(stack, "mariadb") as sql, sql.conn.cursor() as cur:
        for statement in statements:
            cur.execute(statement)
