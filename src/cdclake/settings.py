"""Every ``CDC_*`` environment variable of cdclake, parsed into one typed, frozen :class:`Settings`.

This module is the only one in ``cdclake`` that reads ``CDC_*`` variables from the environment. The edges (the
CLI commands, the ``jobs/`` entry points, the Airflow plugin and DAG files, the local stack) read
:func:`settings`; the modules below them take the values as parameters, or call :func:`settings` themselves
where threading a value through would be disproportionate.

Every variable is optional. An empty value (or one of spaces only) counts as unset. A value that does not parse
raises :class:`~cdclake.exceptions.ConfigError` naming the variable and what it accepts; :meth:`Settings.from_env`
parses all of them, so a bad value stops whatever process reads the settings first.

``docs/configuration.md`` is rendered from the fields (:func:`render_markdown`;
``python -m cdclake.settings > docs/configuration.md`` writes it).
"""

from __future__ import annotations

import functools
import math
import os
import re
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field, fields
from datetime import timedelta
from pathlib import Path
from typing import Any, Literal, get_args

from cdclake.exceptions import ConfigError

#: The shortest schedule of the ingest DAGs (``CDC_INGEST_INTERVAL``).
MIN_INGEST_INTERVAL = timedelta(seconds=10)
LakeKind = Literal["embedded", "rest"]
LogLevel = Literal["DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"]
SparkCds = Literal["auto", "off"]
StackProfile = Literal["default", "cluster"]
_LITERALS = {"LakeKind": LakeKind, "LogLevel": LogLevel, "SparkCds": SparkCds, "StackProfile": StackProfile}
#: The most Spark workers the cluster profile starts (``CDC_SPARK_WORKERS``).
MAX_SPARK_WORKERS = 4
_VARIABLE = "cdclake.variable"


@dataclass(frozen=True)
class Variable:
    """How one field of :class:`Settings` is read from the environment.

    Attributes:
        env: the variable's name.
        doc: what it sets (one line).
        parse: text (stripped, not empty) -> value; raises ValueError when the text is not accepted.
        accepts: the accepted values, for error messages and the docs.
        shown_default: the default as the docs show it, when the field's default value does not say it all.
    """

    env: str
    doc: str
    parse: Callable[[str], Any]
    accepts: str
    shown_default: str | None = None


def _var(
    env: str,
    default: Any,
    doc: str,
    parse: Callable[[str], Any],
    accepts: str,
    *,
    shown_default: str | None = None,
    secret: bool = False,
) -> Any:
    return field(
        default=default,
        repr=not secret,
        metadata={_VARIABLE: Variable(env, doc, parse, accepts, shown_default)},
    )


# -- parsers: text (stripped, never empty) -> value, ValueError when it is not accepted ------------------------


def _text(raw: str) -> str:
    return raw


def _path(raw: str) -> Path:
    return Path(raw)


def _port(raw: str) -> int:
    port = int(raw)
    if not 0 < port < 65536:
        raise ValueError(raw)
    return port


def _positive_int(raw: str) -> int:
    value = int(raw)
    if value < 1:
        raise ValueError(raw)
    return value


def _bounded_int(low: int, high: int) -> Callable[[str], int]:
    def parse(raw: str) -> int:
        value = int(raw)
        if not low <= value <= high:
            raise ValueError(raw)
        return value

    return parse


def _seconds(raw: str) -> float:
    value = float(raw)
    if not math.isfinite(value) or value < 0:
        raise ValueError(raw)
    return value


def _names(raw: str) -> tuple[str, ...]:
    return tuple(name.strip() for name in raw.split(",") if name.strip())


_INTERVAL = re.compile(r"^(\d+(?:\.\d+)?)\s*(s|m|h)?$")
_UNITS = {"s": 1, "m": 60, "h": 3600, None: 1}


def _duration(minimum: timedelta) -> Callable[[str], timedelta]:
    """A parser of ``90s``, ``1m``, ``2h`` or seconds, refusing durations shorter than ``minimum``."""

    def parse(raw: str) -> timedelta:
        match = _INTERVAL.match(raw)
        if not match:
            raise ValueError(raw)
        duration = timedelta(seconds=float(match.group(1)) * _UNITS[match.group(2)])
        if duration < minimum:
            raise ValueError(raw)
        return duration

    return parse


_interval = _duration(MIN_INGEST_INTERVAL)


def interval_text(interval: timedelta) -> str:
    """A duration as ``CDC_INGEST_INTERVAL`` writes it (``1m``, ``90s``, ``2h``); parsing it gives it back."""
    seconds = interval.total_seconds()
    for unit, size in (("h", 3600), ("m", 60)):
        if seconds >= size and seconds % size == 0:
            return f"{int(seconds // size)}{unit}"
    return f"{seconds:g}s"


def _choice(*options: str, aliases: Mapping[str, str] | None = None, upper: bool = False) -> Callable[[str], str]:
    def parse(raw: str) -> str:
        key = raw.upper() if upper else raw.lower()
        value = (aliases or {}).get(key, key)
        if value not in options:
            raise ValueError(raw)
        return value

    return parse


_MEMORY = re.compile(r"^\d+(?:[kmgtp]b?|b)?$", re.IGNORECASE)


def _memory(raw: str) -> str:
    if not _MEMORY.match(raw):
        raise ValueError(raw)
    return raw


def _spark_conf(raw: str) -> tuple[tuple[str, str], ...]:
    pairs = []
    for item in (part.strip() for part in raw.split(";")):
        if not item:
            continue
        key, sep, value = (text.strip() for text in item.partition("="))
        if not sep or not key.startswith("spark.") or not value:
            raise ValueError(item)
        pairs.append((key, value))
    if not pairs:
        raise ValueError(raw)
    return tuple(pairs)


_OFF = ("off", "0", "false", "no")
_ON = ("auto", "on", "1", "true", "yes")

# -- the settings -------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Settings:
    """The ``CDC_*`` environment variables, typed. Build with :meth:`from_env` (or :func:`settings`).

    Each field's metadata holds its :class:`Variable` (name, one-line doc, parser, accepted values);
    :attr:`explicit` names the fields the environment set.
    """

    # where things are
    home: Path | None = _var(
        "CDC_HOME",
        None,
        "the project directory (`include/`, `dags/`, `jobs/`, `jvm/`); unset: the current directory or the "
        "first parent with `pyproject.toml` and `jvm/pom.xml`, else the checkout cdclake is installed from",
        _path,
        "a directory",
        shown_default="the checkout",
    )
    jvm_dir: Path | None = _var(
        "CDC_JVM_DIR",
        None,
        "resolved jars (`kafka/`, `connect-plugins/`, `spark/`) and the Spark driver's class-data sharing archive",
        _path,
        "a directory",
        shown_default="`$CDC_HOME/.cache/jvm`",
    )
    stack_dir: Path | None = _var(
        "CDC_STACK_DIR",
        None,
        "the local stack's state: data, logs, pid files, `secrets.env`",
        _path,
        "a directory",
        shown_default="`$CDC_HOME/.stack`",
    )
    spec_dir: Path | None = _var(
        "CDC_SPEC_DIR",
        None,
        "the connector specs (`*.yaml`) the DAGs, the jobs and `cdclake` read by name",
        _path,
        "a directory",
        shown_default="`$CDC_HOME/include/connectors`",
    )
    lake_dir: Path | None = _var(
        "CDC_LAKE_DIR",
        None,
        "the embedded lake: `catalog.db` (SQLite Iceberg catalog) and `warehouse/`",
        _path,
        "a directory",
        shown_default="`$CDC_HOME/.lake`",
    )
    run_dir: Path | None = _var(
        "CDC_RUN_DIR",
        None,
        "where the Airflow Spark job tasks have their jobs write their summary files, one per task run",
        _path,
        "a directory",
        shown_default="`<tmp>/cdclake-runs` (the local stack: `.stack/airflow/runs`)",
    )
    # the lake
    lake_kind: LakeKind = _var(
        "CDC_LAKE_KIND",
        "embedded",
        "the lake's catalog: `embedded` (SQLite catalog and warehouse in `CDC_LAKE_DIR`) or `rest` "
        "(`CDC_LAKE_URI`, `CDC_LAKE_WAREHOUSE`, `CDC_LAKE_S3_*`)",
        _choice("embedded", "rest"),
        "`embedded` or `rest`",
    )
    lake_uri: str | None = _var(
        "CDC_LAKE_URI", None, "the Iceberg REST catalog's URL (needed when `CDC_LAKE_KIND=rest`)", _text, "a URL"
    )
    lake_warehouse: str | None = _var(
        "CDC_LAKE_WAREHOUSE",
        None,
        "the REST lake's warehouse location (`s3://bucket/`; the embedded lake's is `<CDC_LAKE_DIR>/warehouse`)",
        _text,
        "a location",
    )
    lake_s3_endpoint: str | None = _var(
        "CDC_LAKE_S3_ENDPOINT", None, "the REST lake's S3-compatible object storage endpoint", _text, "a URL"
    )
    lake_s3_access_key_id: str | None = _var(
        "CDC_LAKE_S3_ACCESS_KEY_ID", None, "the object storage's access key id", _text, "text"
    )
    lake_s3_secret_access_key: str | None = _var(
        "CDC_LAKE_S3_SECRET_ACCESS_KEY", None, "the object storage's secret access key", _text, "text", secret=True
    )
    lake_s3_region: str | None = _var("CDC_LAKE_S3_REGION", None, "the object storage's region", _text, "text")
    # the Airflow deployment
    sources: tuple[str, ...] = _var(
        "CDC_SOURCES",
        (),
        "the sources the deployment runs: only these get `cdc_ingest__<source>` DAGs and appear in the DAGs' "
        "`source` Params",
        _names,
        "comma-separated spec names of `include/connectors/`",
        shown_default="every spec (the local stack: `postgres,mariadb`)",
    )
    ingest_interval: timedelta = _var(
        "CDC_INGEST_INTERVAL",
        timedelta(minutes=5),
        "the schedule of the `cdc_ingest__<source>` DAGs",
        _interval,
        f"a duration of at least {MIN_INGEST_INTERVAL.seconds} s: `90s`, `1m`, `2h` or seconds (`300`)",
        shown_default="`5m` (the local stack: `1m`)",
    )
    task_retry_delay: timedelta = _var(
        "CDC_TASK_RETRY_DELAY",
        timedelta(seconds=30),
        "how long a failed task of the cdclake DAGs waits before its first retry (each later one waits twice as "
        "long, up to 10 minutes)",
        _duration(timedelta(seconds=1)),
        "a duration of at least 1 s: `30s`, `2m` or seconds (`30`)",
        shown_default="`30s`",
    )
    follow_sources: tuple[str, ...] = _var(
        "CDC_FOLLOW_SOURCES",
        (),
        "the sources ingested continuously: each gets a `cdc_follow__<source>` DAG that keeps an `ingest --follow` "
        "job running",
        _names,
        "comma-separated spec names among the deployment's sources",
        shown_default="none",
    )
    follow_run_for: timedelta = _var(
        "CDC_FOLLOW_RUN_FOR",
        timedelta(minutes=30),
        "how long one run of a `cdc_follow__<source>` DAG follows before it stops between batches and the next "
        "run takes over",
        _interval,
        f"a duration of at least {MIN_INGEST_INTERVAL.seconds} s: `90s`, `30m`, `1h` or seconds",
        shown_default="`30m`",
    )
    spark_pool: str = _var(
        "CDC_SPARK_POOL",
        "default_pool",
        "the Airflow pool of every Spark job task (its slots bound how many run at once)",
        _text,
        "an Airflow pool name",
        shown_default="`default_pool` (the local stack: `cdc_spark`)",
    )
    spark_slots: int = _var(
        "CDC_SPARK_SLOTS",
        1,
        "slots of the local stack's `cdc_spark` pool, set at `stack up` (Spark drivers at once)",
        _positive_int,
        "a positive whole number of Spark jobs at once",
    )
    # Spark
    spark_master: str = _var(
        "CDC_SPARK_MASTER",
        "local[*]",
        "the Spark master of a session built outside spark-submit",
        _text,
        "a master URL",
    )
    spark_conf: tuple[tuple[str, str], ...] = _var(
        "CDC_SPARK_CONF",
        (),
        "Spark settings every cdclake session adds to its own (shuffle partitions, executor size, dynamic "
        "allocation on a real cluster; docs/local-stack.md); an Airflow task's `conf` still wins",
        _spark_conf,
        "`key=value` pairs of `spark.*` settings separated by `;`",
        shown_default="none",
    )
    spark_driver_memory: str = _var(
        "CDC_SPARK_DRIVER_MEMORY",
        "900m",
        "the driver JVM's heap outside spark-submit (the whole job in `local[*]`)",
        _memory,
        "a JVM memory size: digits with an optional unit `k`, `m`, `g`, `t` (`512m`, `2g`)",
    )
    spark_cds: SparkCds = _var(
        "CDC_SPARK_CDS",
        "auto",
        "`off`: drivers do not map the class-data sharing archive of `<CDC_JVM_DIR>/cds/` (`auto` maps it when it "
        "matches the JDK and Spark's jars)",
        _choice("auto", "off", aliases={**dict.fromkeys(_OFF, "off"), **dict.fromkeys(_ON, "auto")}),
        f"`auto` (or {', '.join(f'`{v}`' for v in _ON[1:])}) or `off` (or {', '.join(f'`{v}`' for v in _OFF[1:])})",
    )
    spark_jit: str = _var(
        "CDC_SPARK_JIT",
        "tiered",
        "`quick`: drivers this process launches compile Java with the JVM's quick (C1) compiler only, which spends "
        "less CPU on short jobs on a busy machine (the test suite sets it); `tiered` adds the optimising (C2) "
        "compiler at raised thresholds, for long batches",
        _choice("tiered", "quick"),
        "`tiered` or `quick`",
    )
    # the local stack's ports
    kafka_port: int = _var("CDC_KAFKA_PORT", 9092, "the local stack's Kafka broker", _port, "a port number (1-65535)")
    kafka_controller_port: int = _var(
        "CDC_KAFKA_CONTROLLER_PORT", 9093, "the local stack's KRaft controller", _port, "a port number (1-65535)"
    )
    connect_port: int = _var(
        "CDC_CONNECT_PORT", 8083, "the local stack's Kafka Connect REST API", _port, "a port number (1-65535)"
    )
    postgres_port: int = _var(
        "CDC_POSTGRES_PORT", 5433, "the local stack's PostgreSQL", _port, "a port number (1-65535)"
    )
    mariadb_port: int = _var("CDC_MARIADB_PORT", 3307, "the local stack's MariaDB", _port, "a port number (1-65535)")
    airflow_port: int = _var(
        "CDC_AIRFLOW_PORT",
        8080,
        "the local stack's Airflow (UI, REST and execution API)",
        _port,
        "a port number (1-65535)",
    )
    # the local stack's cluster profile (`cdclake stack up --profile cluster`)
    stack_profile: StackProfile = _var(
        "CDC_STACK_PROFILE",
        "default",
        "which services `cdclake stack up` starts: `cluster` adds a Spark standalone master and workers, an "
        "Iceberg REST catalog and an S3-compatible object store (s3proxy) to the default ones",
        _choice("default", "cluster"),
        "`default` or `cluster`",
    )
    spark_master_port: int = _var(
        "CDC_SPARK_MASTER_PORT", 7077, "the cluster profile's Spark master", _port, "a port number (1-65535)"
    )
    spark_ui_port: int = _var(
        "CDC_SPARK_UI_PORT",
        8090,
        "the cluster profile's Spark master web UI; worker `n` serves its own on this port + `n`",
        _port,
        "a port number (1-65535)",
    )
    spark_workers: int = _var(
        "CDC_SPARK_WORKERS",
        1,
        "Spark workers of the cluster profile",
        _bounded_int(1, MAX_SPARK_WORKERS),
        f"a whole number from 1 to {MAX_SPARK_WORKERS}",
    )
    spark_worker_cores: int = _var(
        "CDC_SPARK_WORKER_CORES",
        2,
        "cores each Spark worker of the cluster profile offers to executors",
        _positive_int,
        "a positive whole number",
    )
    spark_worker_memory: str = _var(
        "CDC_SPARK_WORKER_MEMORY",
        "3g",
        "memory each Spark worker of the cluster profile offers to executors",
        _memory,
        "a JVM memory size: digits with an optional unit `k`, `m`, `g`, `t` (`512m`, `2g`)",
    )
    iceberg_rest_port: int = _var(
        "CDC_ICEBERG_REST_PORT", 8181, "the cluster profile's Iceberg REST catalog", _port, "a port number (1-65535)"
    )
    s3_port: int = _var(
        "CDC_S3_PORT",
        9000,
        "the cluster profile's S3-compatible object store (s3proxy)",
        _port,
        "a port number (1-65535)",
    )
    # the ingestion job
    tx_max_incomplete_age_s: float = _var(
        "CDC_TX_MAX_INCOMPLETE_AGE_S",
        600.0,
        "seconds after which the ingestion job applies (and reports) a transaction still incomplete",
        _seconds,
        "a number of seconds, 0 or more",
    )
    max_record_bytes: int = _var(
        "CDC_MAX_RECORD_BYTES",
        64 * 1024 * 1024,
        "a Kafka record value longer than this many bytes is dead-lettered (oversized_record) and never parsed",
        _positive_int,
        "a whole number of bytes, 1 or more",
    )
    apply_threads: int = _var(
        "CDC_APPLY_THREADS",
        2,
        "tables of one batch the ingestion job applies at once, each in a driver thread of its own (`1`: one "
        "after another)",
        _bounded_int(1, 32),
        "a whole number from 1 to 32",
    )
    lock_label: str = _var(
        "CDC_LOCK_LABEL",
        "",
        "what a run holding a source's lock is, shown to a run that waits for it (the Airflow operator sets it)",
        _text,
        "text",
        shown_default="unset",
    )
    fault_at: str | None = _var(
        "CDC_FAULT_AT",
        None,
        "tests only: the ingestion job exits abruptly (status 137) at this point (`cdclake.ingest.faults`); with "
        "`table-partial`, an upsert table's writes always take their two commits (a MERGE, then an append) so that "
        "the point lies between them",
        _text,
        "`planned`, `table:N`, `tombstones`, `table-partial`, `before-commit` or `after-commit`",
    )
    fault_once: Path | None = _var(
        "CDC_FAULT_ONCE",
        None,
        "tests only: with `CDC_FAULT_AT`, a marker file: the job crashes only when it does not exist, and creates "
        "it, so that a retry of the job (an Airflow retry) gets past the crash point",
        _path,
        "a file path",
        shown_default="unset (every run crashes)",
    )
    # the CLI
    log_level: LogLevel = _var(
        "CDC_LOG_LEVEL",
        "WARNING",
        "the CLI's log level (`cdclake -v` logs debug details)",
        _choice("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL", upper=True),
        "`DEBUG`, `INFO`, `WARNING`, `ERROR` or `CRITICAL` (any case)",
    )

    explicit: frozenset[str] = field(default=frozenset(), repr=False)
    """Names of the fields the environment set (the others hold their defaults)."""

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> Settings:
        """Parse the ``CDC_*`` variables of ``environ`` (default: this process's environment).

        Raises:
            ConfigError: naming the variable and the accepted values, when one does not parse.
        """
        env = os.environ if environ is None else environ
        values: dict[str, Any] = {}
        for name, var in variables():
            raw = (env.get(var.env) or "").strip()
            if not raw:
                continue
            try:
                values[name] = var.parse(raw)
            except ValueError:
                raise ConfigError(f"{var.env}={raw!r} is not accepted; expected {var.accepts}") from None
        return cls(**values, explicit=frozenset(values))

    @staticmethod
    def env_name(name: str) -> str:
        """The environment variable of field ``name``."""
        return dict(variables())[name].env


def variables() -> Iterator[tuple[str, Variable]]:
    """Every field of :class:`Settings` read from the environment, with its :class:`Variable`, in field order."""
    for f in fields(Settings):
        if _VARIABLE in f.metadata:
            yield f.name, f.metadata[_VARIABLE]


_ENV_NAMES = tuple(var.env for _, var in variables())


def settings() -> Settings:
    """This process's settings: :meth:`Settings.from_env` of its environment.

    Parsed once per distinct set of values of the variables, so a change to the environment (a test's
    ``monkeypatch.setenv``) shows in the next call.

    Raises:
        ConfigError: naming the variable and the accepted values, when one does not parse.
    """
    return _parsed(tuple((name, os.environ.get(name)) for name in _ENV_NAMES))


@functools.lru_cache(maxsize=8)
def _parsed(items: tuple[tuple[str, str | None], ...]) -> Settings:
    return Settings.from_env({name: value for name, value in items if value is not None})


# -- docs/configuration.md ----------------------------------------------------------------------------------------


def _type_text(annotation: str) -> str:
    for alias, literal in _LITERALS.items():
        annotation = annotation.replace(alias, " | ".join(repr(value) for value in get_args(literal)))
    return annotation.replace("|", "\\|")


def _default_text(value: Any) -> str:
    if value is None or value == "" or value == ():
        return "unset"
    if isinstance(value, timedelta):
        return f"`{interval_text(value)}`"
    if isinstance(value, float):
        return f"`{value:g}`"
    return f"`{value}`"


def render_markdown() -> str:
    """``docs/configuration.md``: a table of every variable (name, type, default, accepted values, meaning)."""
    types = {f.name: str(f.type) for f in fields(Settings)}
    defaults = {f.name: f.default for f in fields(Settings)}
    lines = [
        "# Configuration",
        "",
        "<!-- Generated from cdclake.settings.Settings: python -m cdclake.settings > docs/configuration.md -->",
        "",
        "Every `CDC_*` environment variable cdclake reads, parsed in one place (`cdclake.settings.Settings`).",
        "All are optional; an empty value counts as unset. A value that does not parse stops the command, job or",
        "DAG file that reads the settings, with an error naming the variable and what it accepts.",
        "",
        "Timeouts and retries are constants, not variables: the DAGs' in [airflow.md](airflow.md#timeouts), the",
        "lake catalog's in [ingestion.md](ingestion.md#the-lakes-catalog-timeouts-and-retries); Kafka Connect's",
        "and the source databases' are options of their connections ([connectors.md](connectors.md),",
        "[reconcile.md](reconcile.md)).",
        "",
        "| variable | type | default | accepted values | meaning |",
        "|---|---|---|---|---|",
    ]
    for name, var in variables():
        default = var.shown_default or _default_text(defaults[name])
        lines.append(f"| `{var.env}` | `{_type_text(types[name])}` | {default} | {var.accepts} | {var.doc} |")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    print(render_markdown(), end="")
