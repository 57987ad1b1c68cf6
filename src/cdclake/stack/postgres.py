"""PostgreSQL (Debian package) with logical decoding, a demo database and least-privilege roles.

Roles (passwords generated into ``<state>/secrets.env``):

* ``cdclake_admin``: superuser, used only by the stack itself;
* ``debezium``: ``LOGIN REPLICATION``; ``CONNECT`` on ``demo``, ``USAGE`` + ``SELECT`` on schema
  ``inventory`` (also for tables created later, via default privileges), ``INSERT`` on the signal
  table (incremental-snapshot watermarks). The publication ``cdclake_pub`` is created by the admin,
  so Debezium runs with ``publication.autocreate.mode=disabled`` and needs no ownership;
* ``cdc_signal``: ``INSERT`` on ``inventory.debezium_signal`` and nothing else (Airflow's signal writer);
* ``cdc_reader``: ``CONNECT`` on ``demo``, ``USAGE`` + ``SELECT`` on schema ``inventory`` (also for tables
  created later); Airflow's source reader (row counts, source-vs-lake reconciliation);
* ``cdclake_app``: owns schema ``inventory`` (demo tables, workloads, tests);
* ``airflow``: owns database ``airflow``, the stack's Airflow metadata database, and nothing else.
"""

from __future__ import annotations

import hashlib
import os
import pwd
import shutil
import stat
import subprocess
from pathlib import Path

from cdclake.exceptions import StackError
from cdclake.stack.base import Endpoint, Service
from cdclake.stack.config import (
    DEMO_DATABASE,
    ICEBERG_DATABASE,
    ICEBERG_DB_SECRET,
    ICEBERG_ROLE,
    POSTGRES_PUBLICATION,
    POSTGRES_SCHEMA,
    SIGNAL_TABLE,
    password,
)

ADMIN_USER = "cdclake_admin"
ROLE_NAMES = {"debezium": "debezium", "signal": "cdc_signal", "reader": "cdc_reader", "app": "cdclake_app"}
#: The Airflow metadata database and the role that owns it (password ``AIRFLOW_DB_PASSWORD``).
AIRFLOW_DATABASE = "airflow"
AIRFLOW_ROLE = "airflow"


def _run_as() -> str | None:
    """PostgreSQL refuses to run as root: when we are root, run it as the Debian ``postgres`` user."""
    if os.geteuid() != 0:
        return None
    try:
        pwd.getpwnam("postgres")
    except KeyError as exc:
        raise StackError("postgres: running as root but the 'postgres' OS user does not exist") from exc
    return "postgres"


def _others_can_enter(path: Path) -> bool:
    """True when every directory from ``/`` down to ``path`` can be entered by other users."""
    for folder in (path, *path.parents):
        try:
            if folder.exists() and not folder.stat().st_mode & stat.S_IXOTH:
                return False
        except OSError:
            return False
    return True


class PostgresService(Service):
    name = "postgres"

    @property
    def home(self) -> Path:
        """``<state>/postgres``; when PostgreSQL must run as the ``postgres`` user but the state
        directory sits below a private folder, ``/var/lib/cdclake/<id>/postgres`` instead."""
        default = self.config.state_dir / self.name
        if _run_as() is None or _others_can_enter(self.config.state_dir.parent):
            return default
        digest = hashlib.sha1(str(self.config.state_dir).encode()).hexdigest()[:12]
        return Path("/var/lib/cdclake") / f"stack-{digest}" / self.name

    @property
    def data_dir(self):  # type: ignore[no-untyped-def]
        return self.home / "data"

    @property
    def socket_dir(self):  # type: ignore[no-untyped-def]
        return self.home / "run"

    @property
    def marker(self) -> str:
        return str(self.data_dir)

    def endpoints(self) -> list[Endpoint]:
        return [Endpoint("PostgreSQL", self.config.postgres_port, "CDC_POSTGRES_PORT")]

    def _chown(self, *paths) -> None:  # type: ignore[no-untyped-def]
        user = _run_as()
        if user:
            for path in paths:
                shutil.chown(path, user, user)

    def prepare(self) -> None:
        self.home.mkdir(parents=True, exist_ok=True)
        if self.home.parent != self.config.state_dir:
            # relocated: make the parent enterable and leave a pointer in the state directory
            self.home.parent.chmod(0o755)
            (self.config.state_dir / "postgres.location").write_text(f"{self.home}\n")
        self.socket_dir.mkdir(parents=True, exist_ok=True)
        self._chown(self.home, self.socket_dir)
        if (self.data_dir / "PG_VERSION").exists():
            return
        pwfile = self.home / ".pwfile"
        pwfile.write_text(password(self.secrets, "postgres", "admin") + "\n")
        self._chown(pwfile)
        try:
            result = subprocess.run(
                [
                    str(self.bins.postgres_bin / "initdb"),
                    "-D",
                    str(self.data_dir),
                    "-U",
                    ADMIN_USER,
                    "--auth=scram-sha-256",
                    f"--pwfile={pwfile}",
                    "--encoding=UTF8",
                    "--locale=C.UTF-8",
                ],
                capture_output=True,
                text=True,
                timeout=120,
                user=_run_as(),
            )
        finally:
            pwfile.unlink(missing_ok=True)
        if result.returncode != 0:
            hint = ""
            if "Permission denied" in result.stderr and _run_as():
                hint = (
                    f"\nPostgreSQL runs as the OS user 'postgres', which must be able to enter every parent "
                    f"directory of {self.home}; choose a state directory outside private folders (CDC_STACK_DIR)."
                )
            raise StackError(f"postgres: initdb failed:\n{result.stdout}\n{result.stderr}{hint}")

    def start(self) -> None:
        c = self.config
        settings = {
            "listen_addresses": c.host,
            "port": str(c.postgres_port),
            "unix_socket_directories": str(self.socket_dir),
            "wal_level": "logical",
            "max_wal_senders": "10",
            "max_replication_slots": "10",
            "shared_buffers": "64MB",
            # Airflow's scheduler, DAG processor, triggerer and API server keep connection pools too
            "max_connections": "120",
            "timezone": "UTC",
            "log_timezone": "UTC",
        }
        argv = [str(self.bins.postgres_bin / "postgres"), "-D", str(self.data_dir)]
        for key, value in settings.items():
            argv += ["-c", f"{key}={value}"]
        self.process.start(argv, user=_run_as(), cwd=self.home)

    def connect(self, user: str = "admin", dbname: str = "postgres"):  # type: ignore[no-untyped-def]
        """A psycopg connection as one of the stack's users (``admin``, ``debezium``, ``signal``, ``app``)."""
        import psycopg

        role = ADMIN_USER if user == "admin" else ROLE_NAMES[user]
        return psycopg.connect(
            host=self.config.host,
            port=self.config.postgres_port,
            user=role,
            password=password(self.secrets, "postgres", user),
            dbname=dbname,
            connect_timeout=5,
            autocommit=True,
        )

    def ready(self) -> bool:
        with self.connect() as conn:
            return conn.execute("SELECT 1").fetchone() == (1,)

    def bootstrap(self) -> None:
        from psycopg import sql

        logins = {role: password(self.secrets, "postgres", key) for key, role in ROLE_NAMES.items()}
        logins[AIRFLOW_ROLE] = self.secrets["AIRFLOW_DB_PASSWORD"]
        logins[ICEBERG_ROLE] = self.secrets[ICEBERG_DB_SECRET]
        with self.connect() as conn:
            for role, secret in logins.items():
                exists = conn.execute("SELECT 1 FROM pg_roles WHERE rolname = %s", [role]).fetchone()
                verb = "ALTER" if exists else "CREATE"
                options = sql.SQL("LOGIN REPLICATION") if role == ROLE_NAMES["debezium"] else sql.SQL("LOGIN")
                conn.execute(
                    sql.SQL("{} ROLE {} WITH {} PASSWORD {}").format(
                        sql.SQL(verb), sql.Identifier(role), options, sql.Literal(secret)
                    )
                )
            owners = (
                (DEMO_DATABASE, ROLE_NAMES["app"]),
                (AIRFLOW_DATABASE, AIRFLOW_ROLE),
                (ICEBERG_DATABASE, ICEBERG_ROLE),
            )
            for database, owner in owners:
                if not conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", [database]).fetchone():
                    conn.execute(
                        sql.SQL("CREATE DATABASE {} OWNER {}").format(sql.Identifier(database), sql.Identifier(owner))
                    )
            # the Airflow database and the cluster profile's Iceberg catalog are their owners' alone
            for database in (AIRFLOW_DATABASE, ICEBERG_DATABASE):
                conn.execute(sql.SQL("REVOKE ALL ON DATABASE {} FROM PUBLIC").format(sql.Identifier(database)))
        app, dbz, sig, reader = (sql.Identifier(ROLE_NAMES[k]) for k in ("app", "debezium", "signal", "reader"))
        schema = sql.Identifier(POSTGRES_SCHEMA)
        signal_table = sql.Identifier(POSTGRES_SCHEMA, SIGNAL_TABLE)
        statements = [
            sql.SQL("REVOKE CREATE ON SCHEMA public FROM PUBLIC"),
            sql.SQL("CREATE SCHEMA IF NOT EXISTS {} AUTHORIZATION {}").format(schema, app),
            sql.SQL("GRANT CONNECT ON DATABASE {} TO {}, {}, {}").format(
                sql.Identifier(DEMO_DATABASE), dbz, sig, reader
            ),
            sql.SQL("GRANT USAGE ON SCHEMA {} TO {}, {}, {}").format(schema, dbz, sig, reader),
            sql.SQL(
                "CREATE TABLE IF NOT EXISTS {} (id VARCHAR(42) PRIMARY KEY, type VARCHAR(32) NOT NULL, data VARCHAR(2048) NULL)"
            ).format(signal_table),
            sql.SQL("ALTER TABLE {} OWNER TO {}").format(signal_table, app),
            sql.SQL("GRANT SELECT ON ALL TABLES IN SCHEMA {} TO {}, {}").format(schema, dbz, reader),
            sql.SQL("ALTER DEFAULT PRIVILEGES FOR ROLE {} IN SCHEMA {} GRANT SELECT ON TABLES TO {}, {}").format(
                app, schema, dbz, reader
            ),
            sql.SQL("GRANT INSERT ON {} TO {}, {}").format(signal_table, dbz, sig),
        ]
        with self.connect(dbname=DEMO_DATABASE) as conn:
            for statement in statements:
                conn.execute(statement)
            if not conn.execute("SELECT 1 FROM pg_publication WHERE pubname = %s", [POSTGRES_PUBLICATION]).fetchone():
                conn.execute(
                    sql.SQL("CREATE PUBLICATION {} FOR ALL TABLES").format(sql.Identifier(POSTGRES_PUBLICATION))
                )

    def describe(self) -> str:
        return f"PostgreSQL {self.config.host}:{self.config.postgres_port} database {DEMO_DATABASE} (wal_level=logical)"
