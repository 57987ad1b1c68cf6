"""The stack's Airflow: its configuration, environment and connections (pure; no process is started)."""

from __future__ import annotations

import configparser
import json
import stat
from pathlib import Path

import pytest

from cdclake.exceptions import ConfigError
from cdclake.stack.airflow import SPARK_POOL, AirflowHome, spark_slots, stack_connections
from cdclake.stack.config import StackConfig, capture_secrets, load_or_create_secrets, secret_names


@pytest.fixture
def home(tmp_path: Path) -> AirflowHome:
    config = StackConfig(
        state_dir=tmp_path / "stack", jvm_dir=tmp_path / "jvm", airflow_port=18080, postgres_port=15433
    )
    return AirflowHome(config, load_or_create_secrets(config))


def test_the_secrets_are_generated_once_and_kept_private(home: AirflowHome) -> None:
    secrets = dict(home.secrets)
    assert set(secrets) == set(secret_names())
    assert len(set(secrets.values())) == len(secrets)  # all different
    from cryptography.fernet import Fernet

    Fernet(secrets["AIRFLOW_FERNET_KEY"].encode())  # a valid Fernet key
    assert load_or_create_secrets(home.config) == secrets
    assert stat.S_IMODE(home.config.secrets_file.stat().st_mode) == 0o600
    # Kafka Connect only gets what its connectors reference
    assert set(capture_secrets(secrets)) == {"CDC_POSTGRES_DEBEZIUM_PASSWORD", "CDC_MARIADB_DEBEZIUM_PASSWORD"}


def test_airflow_cfg_runs_the_project_on_the_stacks_postgres(home: AirflowHome) -> None:
    cfg = configparser.ConfigParser(interpolation=None)
    cfg.read_string(home.render_config())
    assert cfg["core"]["executor"] == "LocalExecutor"
    assert cfg["core"]["load_examples"] == "False" and cfg["core"]["dags_are_paused_at_creation"] == "True"
    assert cfg["core"]["dags_folder"].endswith("/dags") and cfg["core"]["plugins_folder"].endswith("/plugins")
    assert cfg["core"]["execution_api_server_url"] == "http://127.0.0.1:18080/execution/"
    assert cfg["core"]["fernet_key"] == home.secrets["AIRFLOW_FERNET_KEY"]
    url = f"postgresql+psycopg://airflow:{home.secrets['AIRFLOW_DB_PASSWORD']}@127.0.0.1:15433/airflow"
    assert cfg["database"]["sql_alchemy_conn"] == cfg["database"]["sql_alchemy_conn_async"] == url
    assert cfg["api_auth"]["jwt_secret"] == home.secrets["AIRFLOW_JWT_SECRET"]


def test_the_files_holding_secrets_are_private_and_the_environment_holds_none(home: AirflowHome) -> None:
    home.prepare()
    for path in (home.config_file, home.passwords_file):
        assert stat.S_IMODE(path.stat().st_mode) == 0o600, path
    assert json.loads(home.passwords_file.read_text()) == {"admin": home.secrets["AIRFLOW_ADMIN_PASSWORD"]}
    env = home.environment()
    assert env["CDC_SOURCES"] == "postgres,mariadb" and env["AIRFLOW_HOME"] == str(home.path)
    values = "\n".join(env.values()) + home.environment_file.read_text()
    assert [name for name in secret_names() if home.secrets[name] in values] == []


def test_the_ingest_interval_follows_the_environment(home: AirflowHome, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CDC_INGEST_INTERVAL", raising=False)
    assert home.environment()["CDC_INGEST_INTERVAL"] == "1m"
    monkeypatch.setenv("CDC_INGEST_INTERVAL", "5m")
    assert home.environment()["CDC_INGEST_INTERVAL"] == "5m"


def test_spark_jobs_share_one_pool_of_cdc_spark_slots(home: AirflowHome, monkeypatch: pytest.MonkeyPatch) -> None:
    assert home.environment()["CDC_SPARK_POOL"] == SPARK_POOL
    monkeypatch.delenv("CDC_SPARK_SLOTS", raising=False)
    assert spark_slots() == 1
    monkeypatch.setenv("CDC_SPARK_SLOTS", "3")
    assert spark_slots() == 3
    for bad in ("0", "two", "-1"):
        monkeypatch.setenv("CDC_SPARK_SLOTS", bad)
        with pytest.raises(ConfigError, match=f"CDC_SPARK_SLOTS='{bad}'"):
            spark_slots()


def test_the_connections_of_the_stack(home: AirflowHome) -> None:
    conns = stack_connections(home.config, home.secrets)
    assert set(conns) == {"kafka_connect_default", "kafka_default", "spark_default", "cdc_postgres",
                          "cdc_postgres_reader", "cdc_mariadb", "cdc_mariadb_reader"}  # fmt: skip
    assert conns["kafka_connect_default"]["conn_type"] == "kafka_connect"
    assert json.loads(conns["kafka_default"]["extra"])["bootstrap.servers"] == "127.0.0.1:9092"
    assert (conns["cdc_postgres"]["login"], conns["cdc_postgres_reader"]["login"]) == ("cdc_signal", "cdc_reader")
    assert conns["cdc_mariadb_reader"]["password"] == home.secrets["CDC_MARIADB_READER_PASSWORD"]
    assert conns["cdc_mariadb"]["conn_type"] == "mysql" and conns["cdc_postgres"]["port"] == 15433


def test_the_client_environment_adds_the_connections_only_when_asked(home: AirflowHome) -> None:
    plain = home.client_environment()
    assert "PATH" not in plain and plain["AIRFLOW_HOME"] == str(home.path)
    assert not any(key.startswith("AIRFLOW_CONN_") for key in plain)
    full = home.client_environment(connections=True)
    conns = {k: json.loads(v) for k, v in full.items() if k.startswith("AIRFLOW_CONN_")}
    assert set(conns) == {f"AIRFLOW_CONN_{c.upper()}" for c in stack_connections(home.config, home.secrets)}
    reader = conns["AIRFLOW_CONN_CDC_POSTGRES_READER"]
    assert (reader["login"], reader["password"]) == ("cdc_reader", home.secrets["CDC_POSTGRES_READER_PASSWORD"])
    assert isinstance(conns["AIRFLOW_CONN_KAFKA_DEFAULT"]["extra"], dict)


@pytest.fixture
def cluster_home(home: AirflowHome) -> AirflowHome:
    from dataclasses import replace

    config = replace(home.config, stack_profile="cluster")
    return AirflowHome(config, load_or_create_secrets(config))


def test_on_the_cluster_profile_the_spark_connection_and_the_lake_point_at_the_cluster(
    cluster_home: AirflowHome,
) -> None:
    """spark_default names the standalone master; the components write the REST catalog's S3 lake, with the key
    pair in their environment but not in its file; cdclake's own view of Airflow's lake (the demo's) has it."""
    config, secrets = cluster_home.config, cluster_home.secrets
    assert stack_connections(config, secrets)["spark_default"]["host"] == config.spark_master_url
    env = cluster_home.environment()
    assert (env["CDC_LAKE_KIND"], env["CDC_LAKE_URI"]) == ("rest", config.iceberg_rest_url)
    assert env["CDC_LAKE_S3_SECRET_ACCESS_KEY"] == secrets["CDC_S3_SECRET_ACCESS_KEY"]
    assert "CDC_LAKE_DIR" not in env and "CDC_SPARK_MASTER" not in env  # the master is spark_default's
    cluster_home.prepare()
    written = json.loads(cluster_home.environment_file.read_text())
    assert written["CDC_LAKE_URI"] == config.iceberg_rest_url
    assert [name for name in secret_names() if secrets[name] in json.dumps(written)] == []
    lake = cluster_home.lake()
    assert (lake.kind, lake.uri, lake.s3["s3.secret-access-key"]) == (
        "rest",
        config.iceberg_rest_url,
        secrets["CDC_S3_SECRET_ACCESS_KEY"],
    )


def test_components_started_for_the_other_profiles_lake_are_seen(home: AirflowHome, cluster_home: AirflowHome) -> None:
    assert not home.lake_changed()  # never started
    home.prepare()
    assert not home.lake_changed()
    assert cluster_home.lake_changed()  # the same home, now on the cluster profile
    cluster_home.prepare()
    assert not cluster_home.lake_changed() and home.lake_changed()
    assert stack_connections(home.config, home.secrets)["spark_default"]["host"] == "local[*]"
