"""MariaDB (Debian package) with a row-based binlog, GTIDs, a demo database and least-privilege users.

Users (passwords generated into ``<state>/secrets.env``), each at ``127.0.0.1`` and ``localhost``:

* ``root``: used only by the stack itself;
* ``debezium``: exactly what the Debezium MariaDB connector needs (``SELECT, RELOAD, SHOW DATABASES,
  REPLICATION SLAVE, REPLICATION CLIENT ON *.*``) plus ``INSERT`` on the signal table (watermarks);
* ``cdc_signal``: ``INSERT`` on ``demo.debezium_signal`` only (Airflow's signal writer);
* ``cdc_reader``: ``SELECT`` on ``demo.*`` only (Airflow's source reader: row counts, reconciliation);
* ``cdclake_app``: all privileges on ``demo.*`` (demo tables, workloads, tests).
"""

from __future__ import annotations

import subprocess

from cdclake.exceptions import StackError
from cdclake.sql import quote_identifier, quote_name
from cdclake.stack.base import Endpoint, Service
from cdclake.stack.config import DEMO_DATABASE, MARIADB_SERVER_ID, SIGNAL_TABLE, password

USER_NAMES = {
    "admin": "root",
    "debezium": "debezium",
    "signal": "cdc_signal",
    "reader": "cdc_reader",
    "app": "cdclake_app",
}
DEBEZIUM_GLOBAL_GRANTS = "SELECT, RELOAD, SHOW DATABASES, REPLICATION SLAVE, REPLICATION CLIENT"
HOSTS = ("127.0.0.1", "localhost")


class MariaDbService(Service):
    name = "mariadb"

    @property
    def data_dir(self):  # type: ignore[no-untyped-def]
        return self.home / "data"

    @property
    def socket(self):  # type: ignore[no-untyped-def]
        return self.home / "run" / "mariadb.sock"

    @property
    def marker(self) -> str:
        return str(self.data_dir)

    def endpoints(self) -> list[Endpoint]:
        return [Endpoint("MariaDB", self.config.mariadb_port, "CDC_MARIADB_PORT")]

    def _base_args(self) -> list[str]:
        return ["--no-defaults", f"--datadir={self.data_dir}", "--user=root"]

    def prepare(self) -> None:
        (self.home / "run").mkdir(parents=True, exist_ok=True)
        if (self.data_dir / "mysql").is_dir():
            return
        result = subprocess.run(
            [
                str(self.bins.mariadb_install_db),
                *self._base_args(),
                "--auth-root-authentication-method=normal",
                "--skip-test-db",
            ],
            capture_output=True,
            text=True,
            timeout=300,
        )
        if result.returncode != 0:
            raise StackError(f"mariadb: mariadb-install-db failed:\n{result.stdout}\n{result.stderr}")

    def start(self) -> None:
        c = self.config
        argv = [
            str(self.bins.mariadbd),
            *self._base_args(),
            f"--port={c.mariadb_port}",
            f"--bind-address={c.host}",
            f"--socket={self.socket}",
            f"--pid-file={self.home / 'run' / 'mariadbd.pid'}",
            f"--server-id={MARIADB_SERVER_ID}",
            "--log-bin=mariadb-bin",
            "--binlog-format=ROW",
            "--binlog-row-image=FULL",
            "--binlog-expire-logs-seconds=864000",
            "--gtid-strict-mode=ON",
            "--default-time-zone=+00:00",
            "--character-set-server=utf8mb4",
            "--collation-server=utf8mb4_unicode_ci",
            "--innodb-buffer-pool-size=64M",
            "--innodb-log-file-size=48M",
            "--performance-schema=OFF",
            "--skip-name-resolve",
            "--max-connections=60",
        ]
        self.process.start(argv, cwd=self.home)

    def connect(self, user: str = "admin", database: str | None = None):  # type: ignore[no-untyped-def]
        """A PyMySQL connection as one of the stack's users (``admin``, ``debezium``, ``signal``, ``app``)."""
        import pymysql

        return pymysql.connect(
            host=self.config.host,
            port=self.config.mariadb_port,
            user=USER_NAMES[user],
            password=password(self.secrets, "mariadb", user),
            database=database,
            connect_timeout=5,
            autocommit=True,
        )

    def _admin(self):  # type: ignore[no-untyped-def]
        """Root over the socket: with its password, or (right after install-db) without one."""
        import pymysql

        try:
            return pymysql.connect(
                unix_socket=str(self.socket),
                user="root",
                password=password(self.secrets, "mariadb", "admin"),
                autocommit=True,
            )
        except pymysql.err.OperationalError as exc:
            if exc.args and exc.args[0] == 1045:  # access denied: password not set yet
                return pymysql.connect(unix_socket=str(self.socket), user="root", password="", autocommit=True)
            raise

    def ready(self) -> bool:
        with self._admin() as conn, conn.cursor() as cur:
            cur.execute("SELECT 1")
            return cur.fetchone() == (1,)

    def bootstrap(self) -> None:
        database = quote_identifier(DEMO_DATABASE)
        signals = quote_name((DEMO_DATABASE, SIGNAL_TABLE))
        with self._admin() as conn, conn.cursor() as cur:
            cur.execute(f"CREATE DATABASE IF NOT EXISTS {database} CHARACTER SET utf8mb4")
            cur.execute(
                f"CREATE TABLE IF NOT EXISTS {signals} "
                "(id VARCHAR(42) PRIMARY KEY, type VARCHAR(32) NOT NULL, data VARCHAR(2048) NULL)"
            )
            for key, user in USER_NAMES.items():
                for host in HOSTS:
                    secret = password(self.secrets, "mariadb", key)
                    cur.execute("CREATE USER IF NOT EXISTS %s@%s IDENTIFIED BY %s", (user, host, secret))
                    cur.execute("ALTER USER %s@%s IDENTIFIED BY %s", (user, host, secret))
                    if key == "admin":
                        cur.execute("GRANT ALL PRIVILEGES ON *.* TO %s@%s WITH GRANT OPTION", (user, host))
                    elif key == "debezium":
                        cur.execute(f"GRANT {DEBEZIUM_GLOBAL_GRANTS} ON *.* TO %s@%s", (user, host))
                        cur.execute(f"GRANT INSERT ON {signals} TO %s@%s", (user, host))
                    elif key == "signal":
                        cur.execute(f"GRANT INSERT ON {signals} TO %s@%s", (user, host))
                    elif key == "reader":
                        cur.execute(f"GRANT SELECT ON {database}.* TO %s@%s", (user, host))
                    elif key == "app":
                        cur.execute(f"GRANT ALL PRIVILEGES ON {database}.* TO %s@%s", (user, host))
            cur.execute("FLUSH PRIVILEGES")

    def describe(self) -> str:
        return f"MariaDB {self.config.host}:{self.config.mariadb_port} database {DEMO_DATABASE} (binlog ROW, GTID)"
