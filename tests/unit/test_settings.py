"""The ``CDC_*`` variables: every field parses its default and a given value, a bad value names the variable, the
docs are the rendered table, and nothing but :mod:`cdclake.settings` reads a ``CDC_*`` variable from the
environment."""

from __future__ import annotations

import ast
from collections.abc import Iterable
from dataclasses import fields
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from cdclake.exceptions import ConfigError
from cdclake.settings import Settings, interval_text, render_markdown, settings, variables

ROOT = Path(__file__).resolve().parents[2]
VARIABLES = dict(variables())

#: Per field: a value to set, and what it parses to.
GIVEN: dict[str, tuple[str, Any]] = {
    "home": ("/opt/cdclake", Path("/opt/cdclake")),
    "jvm_dir": ("/opt/jvm", Path("/opt/jvm")),
    "stack_dir": ("relative/stack", Path("relative/stack")),
    "spec_dir": ("/etc/cdclake/specs", Path("/etc/cdclake/specs")),
    "lake_dir": ("/data/lake", Path("/data/lake")),
    "run_dir": ("/tmp/runs", Path("/tmp/runs")),
    "lake_kind": ("rest", "rest"),
    "lake_uri": ("http://iceberg-rest:8181", "http://iceberg-rest:8181"),
    "lake_warehouse": ("s3://warehouse/", "s3://warehouse/"),
    "lake_s3_endpoint": ("http://minio:9000", "http://minio:9000"),
    "lake_s3_access_key_id": ("key-id", "key-id"),
    "lake_s3_secret_access_key": ("s3cret", "s3cret"),
    "lake_s3_region": ("us-east-1", "us-east-1"),
    "sources": (" postgres, mariadb ,", ("postgres", "mariadb")),
    "ingest_interval": ("90s", timedelta(seconds=90)),
    "task_retry_delay": ("2", timedelta(seconds=2)),
    "follow_sources": ("postgres", ("postgres",)),
    "follow_run_for": ("1h", timedelta(hours=1)),
    "spark_pool": ("cdc_spark", "cdc_spark"),
    "spark_slots": ("3", 3),
    "spark_master": ("spark://spark-master:7077", "spark://spark-master:7077"),
    "spark_conf": (
        "spark.sql.shuffle.partitions=48; spark.cores.max = 8;",
        (("spark.sql.shuffle.partitions", "48"), ("spark.cores.max", "8")),
    ),
    "spark_driver_memory": ("512m", "512m"),
    "spark_cds": ("OFF", "off"),
    "kafka_port": ("19092", 19092),
    "kafka_controller_port": ("19093", 19093),
    "connect_port": ("18083", 18083),
    "postgres_port": ("15433", 15433),
    "mariadb_port": ("13307", 13307),
    "airflow_port": ("18080", 18080),
    "stack_profile": ("Cluster", "cluster"),
    "spark_master_port": ("17077", 17077),
    "spark_ui_port": ("18090", 18090),
    "spark_jit": ("Quick", "quick"),
    "spark_workers": ("2", 2),
    "spark_worker_cores": ("1", 1),
    "spark_worker_memory": ("1536m", "1536m"),
    "iceberg_rest_port": ("18181", 18181),
    "s3_port": ("19000", 19000),
    "tx_max_incomplete_age_s": ("30.5", 30.5),
    "max_record_bytes": ("1048576", 1048576),
    "apply_threads": ("4", 4),
    "lock_label": ("airflow dag/run/task", "airflow dag/run/task"),
    "fault_at": ("table:1", "table:1"),
    "fault_once": ("/tmp/ingest.crashed", Path("/tmp/ingest.crashed")),
    "log_level": ("info", "INFO"),
}

#: Per field that can be wrong: a value it does not accept.
BAD: dict[str, str] = {
    "lake_kind": "hive",
    "ingest_interval": "5s",
    "task_retry_delay": "0.5s",
    "spark_slots": "0",
    "spark_conf": "sql.shuffle.partitions=48",
    "spark_driver_memory": "two gigabytes",
    "spark_cds": "maybe",
    "kafka_port": "65536",
    "kafka_controller_port": "-1",
    "connect_port": "http",
    "postgres_port": "0",
    "mariadb_port": "3307.5",
    "airflow_port": "eighty",
    "stack_profile": "kubernetes",
    "spark_workers": "5",
    "spark_worker_memory": "lots",
    "tx_max_incomplete_age_s": "-1",
    "max_record_bytes": "0",
    "apply_threads": "0",
    "log_level": "LOUD",
}


def _as_text(value: Any) -> str:
    """A default as a variable would set it."""
    if isinstance(value, timedelta):
        return interval_text(value)
    if isinstance(value, tuple):
        return ",".join(value)
    return str(value)


def test_every_variable_has_a_given_value_and_a_unique_name() -> None:
    assert sorted(GIVEN) == sorted(VARIABLES)
    envs = [var.env for var in VARIABLES.values()]
    assert len(envs) == len(set(envs)) and all(env.startswith("CDC_") for env in envs)
    assert all(var.doc and var.accepts for var in VARIABLES.values())
    assert set(BAD) <= set(VARIABLES)


@pytest.mark.parametrize("name", sorted(VARIABLES))
def test_a_field_is_its_default_when_unset_or_empty(name: str) -> None:
    default = next(f.default for f in fields(Settings) if f.name == name)
    env = VARIABLES[name].env
    for environ in ({}, {env: ""}, {env: "  "}):
        config = Settings.from_env(environ)
        assert getattr(config, name) == default
        assert name not in config.explicit
    if default not in (None, "", ()):  # the default, written out, parses back to itself
        assert getattr(Settings.from_env({env: _as_text(default)}), name) == default


@pytest.mark.parametrize("name", sorted(VARIABLES))
def test_a_field_parses_a_given_value(name: str) -> None:
    raw, expected = GIVEN[name]
    config = Settings.from_env({VARIABLES[name].env: raw})
    assert getattr(config, name) == expected
    assert config.explicit == {name}


@pytest.mark.parametrize("name", sorted(BAD))
def test_a_bad_value_names_the_variable_and_what_it_accepts(name: str) -> None:
    var = VARIABLES[name]
    with pytest.raises(ConfigError) as info:
        Settings.from_env({var.env: BAD[name]})
    assert str(info.value).startswith(f"{var.env}={BAD[name]!r} ")
    assert var.accepts in str(info.value)


@pytest.mark.parametrize(
    ("value", "interval"),
    [("10", 10), ("90s", 90), ("1.5m", 90), ("1m", 60), ("2h", 7200), ("300", 300), ("0.5m", 30), ("1 m", 60)],
)
def test_ingest_intervals_and_their_text(value: str, interval: int) -> None:
    parsed = Settings.from_env({"CDC_INGEST_INTERVAL": value}).ingest_interval
    assert parsed == timedelta(seconds=interval)
    assert Settings.from_env({"CDC_INGEST_INTERVAL": interval_text(parsed)}).ingest_interval == parsed


def test_cds_and_log_level_take_the_usual_spellings() -> None:
    for raw in ("off", "0", "false", "No"):
        assert Settings.from_env({"CDC_SPARK_CDS": raw}).spark_cds == "off"
    for raw in ("auto", "on", "1", "TRUE", "yes"):
        assert Settings.from_env({"CDC_SPARK_CDS": raw}).spark_cds == "auto"
    assert Settings.from_env({"CDC_LOG_LEVEL": "debug"}).log_level == "DEBUG"


def test_the_secret_key_is_not_in_the_repr() -> None:
    config = Settings.from_env({"CDC_LAKE_S3_SECRET_ACCESS_KEY": "s3cret", "CDC_LAKE_S3_ACCESS_KEY_ID": "key-id"})
    assert "s3cret" not in repr(config) and "key-id" in repr(config)


def test_settings_follow_the_process_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CDC_SPARK_SLOTS", raising=False)
    assert settings().spark_slots == 1
    assert settings() is settings()  # parsed once per environment
    monkeypatch.setenv("CDC_SPARK_SLOTS", "4")
    assert settings().spark_slots == 4
    monkeypatch.setenv("CDC_SPARK_SLOTS", "none")
    with pytest.raises(ConfigError, match="CDC_SPARK_SLOTS='none'"):
        settings()


def test_readers_of_the_settings_see_the_environment_when_they_run(monkeypatch: pytest.MonkeyPatch) -> None:
    """The crash points and a source's transaction age read the settings when called, not at import."""
    from cdclake.ingest import faults
    from cdclake.ingest.config import SourceConfig

    monkeypatch.delenv("CDC_TX_MAX_INCOMPLETE_AGE_S", raising=False)
    assert SourceConfig(name="pg", topic_prefix="pg").max_incomplete_age_s == 600
    monkeypatch.setenv("CDC_TX_MAX_INCOMPLETE_AGE_S", "30")
    assert SourceConfig(name="pg", topic_prefix="pg").max_incomplete_age_s == 30
    assert SourceConfig(name="pg", topic_prefix="pg", max_incomplete_age_s=0).max_incomplete_age_s == 0

    exits: list[int] = []
    monkeypatch.setattr(faults.os, "_exit", exits.append)
    monkeypatch.delenv("CDC_FAULT_AT", raising=False)
    faults.crash_point("planned")
    monkeypatch.setenv("CDC_FAULT_AT", "before-commit")
    faults.crash_point("planned")
    assert exits == []
    faults.crash_point("before-commit")
    assert exits == [137]


def test_the_configuration_reference_is_the_rendered_table() -> None:
    """docs/configuration.md is written by ``python -m cdclake.settings > docs/configuration.md``."""
    assert (ROOT / "docs" / "configuration.md").read_text(encoding="utf-8") == render_markdown()
    text = render_markdown()
    assert all(f"| `{var.env}` |" in text for var in VARIABLES.values())


# -- only cdclake.settings reads CDC_* variables from the environment ---------------------------------------------

SCANNED = (ROOT / "src" / "cdclake", ROOT / "plugins" / "cdclake_airflow", ROOT / "dags", ROOT / "jobs")
SETTINGS_MODULE = ROOT / "src" / "cdclake" / "settings.py"


def _sources() -> dict[Path, ast.Module]:
    return {
        path: ast.parse(path.read_text(encoding="utf-8"), str(path))
        for folder in SCANNED
        for path in sorted(folder.rglob("*.py"))
        if path != SETTINGS_MODULE
    }


def _cdc_constants(trees: Iterable[ast.Module]) -> set[str]:
    """Names assigned a ``"CDC_..."`` string anywhere (``FAULT_ENV = "CDC_FAULT_AT"``)."""
    names = set()
    for tree in trees:
        for node in ast.walk(tree):
            if isinstance(node, ast.Assign | ast.AnnAssign) and _is_cdc_text(node.value):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                names.update(t.id for t in targets if isinstance(t, ast.Name))
    return names


def _is_cdc_text(node: ast.AST | None) -> bool:
    if isinstance(node, ast.Constant):
        return isinstance(node.value, str) and node.value.startswith("CDC_")
    if isinstance(node, ast.JoinedStr):  # f"CDC_{name}_..."
        return bool(node.values) and _is_cdc_text(node.values[0])
    return False


def _names_cdc(node: ast.AST, constants: set[str]) -> bool:
    if _is_cdc_text(node):
        return True
    if isinstance(node, ast.Name):
        return node.id in constants
    if isinstance(node, ast.Attribute):  # module.FAULT_ENV
        return node.attr in constants
    return False


def _is_environ(node: ast.AST) -> bool:
    """``os.environ`` or a bare ``environ``, anywhere in ``node`` (``(os.environ if x else y).get(...)``)."""
    return any(
        (isinstance(n, ast.Attribute) and n.attr == "environ" and isinstance(n.value, ast.Name) and n.value.id == "os")
        or (isinstance(n, ast.Name) and n.id == "environ")
        for n in ast.walk(node)
    )


def env_reads(tree: ast.Module, constants: set[str]) -> list[int]:
    """Lines of ``tree`` that read a ``CDC_*`` variable from the process environment."""
    lines = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and node.args and _names_cdc(node.args[0], constants):
            func = node.func
            getenv = (isinstance(func, ast.Name) and func.id == "getenv") or (
                isinstance(func, ast.Attribute) and func.attr == "getenv"
            )
            method = isinstance(func, ast.Attribute) and _is_environ(func.value)
            if getenv or method:
                lines.append(node.lineno)
        elif isinstance(node, ast.Subscript) and _is_environ(node.value) and _names_cdc(node.slice, constants):
            lines.append(node.lineno)
        elif (
            isinstance(node, ast.Compare)
            and _names_cdc(node.left, constants)
            and any(isinstance(op, ast.In | ast.NotIn) for op in node.ops)
            and any(_is_environ(c) for c in node.comparators)
        ):
            lines.append(node.lineno)
    return lines


@pytest.mark.parametrize(
    "code",
    [
        'os.environ.get("CDC_LAKE_KIND", "embedded")',
        'os.environ["CDC_LAKE_URI"]',
        'os.getenv("CDC_HOME")',
        'getenv("CDC_HOME")',
        'FAULT_ENV = "CDC_FAULT_AT"\nos.environ.get(FAULT_ENV)',
        'FAULT_ENV = "CDC_FAULT_AT"\nos.environ.get(faults.FAULT_ENV)',
        '(os.environ if environ is None else environ).get("CDC_SOURCES", "")',
        'environ.pop("CDC_LOCK_LABEL")',
        'os.environ.get(f"CDC_{name.upper()}_PORT")',
        '"CDC_SPARK_CDS" in os.environ',
    ],
)
def test_the_check_finds_an_environment_read(code: str) -> None:
    tree = ast.parse(code)
    assert env_reads(tree, _cdc_constants([tree])), code


def test_only_the_settings_module_reads_cdc_variables_from_the_environment() -> None:
    trees = _sources()
    assert len(trees) > 50  # src/cdclake, the plugin distribution, the DAG files and the jobs
    constants = _cdc_constants(trees.values())
    found = [f"{path.relative_to(ROOT)}:{line}" for path, tree in trees.items() for line in env_reads(tree, constants)]
    assert found == []
