"""docker-compose.yaml: compose-spec schema, ``config -q`` (when a binary exists) and stack policy.

No Docker engine is needed: the file is parsed and validated, never run. The schema is the official
Compose Specification vendored in ``tests/fixtures/compose-spec.json`` (see its NOTICE file).
"""

from __future__ import annotations

import configparser
import json
import os
import re
import shutil
import subprocess
import xml.etree.ElementTree as ET
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml

from cdclake.stack.connect import BASIC_AUTH_EXTENSION, LOGIN_MODULE

ROOT = Path(__file__).resolve().parents[2]
COMPOSE_FILE = ROOT / "docker-compose.yaml"
ENV_EXAMPLE = ROOT / ".env.example"
DOCKERFILE = ROOT / "docker" / "Dockerfile"
DOCKERIGNORE = ROOT / "docker" / "Dockerfile.dockerignore"
CONNECT_PROPERTIES = ROOT / "docker" / "connect" / "connect-distributed.properties"
SCHEMA_FILE = ROOT / "tests" / "fixtures" / "compose-spec.json"

#: Services that run once and exit (``restart: "no"``); everything else is long-running.
ONE_SHOT_SERVICES = {"airflow-init"}
AIRFLOW_SERVICES = {
    "airflow-init",
    "airflow-apiserver",
    "airflow-scheduler",
    "airflow-dag-processor",
    "airflow-triggerer",
}
AIRFLOW_MOUNTS = {
    "./dags": "/opt/airflow/dags",
    "./plugins": "/opt/airflow/plugins",
    "./include": "/opt/airflow/include",
    "./jobs": "/opt/airflow/jobs",
}
#: Environment keys whose values are secrets.
SECRET_KEY = re.compile(r"(PASSWORD|SECRET|FERNET|JWT|TOKEN|ACCESS_KEY|ACCESS__KEY)(?!\w*_FILE$)", re.IGNORECASE)
#: A whole value that is one reference to a required variable: ${VAR:?message}.
REQUIRED_REF = re.compile(r"^\$\{[A-Z][A-Z0-9_]*:\?[^}]*\}$")
_VAR = re.compile(
    r"\$(?:\$|\{(?P<braced>[A-Za-z_][A-Za-z0-9_]*)(?P<op>:?[-?])?(?P<arg>[^}]*)\}|(?P<bare>[A-Za-z_][A-Za-z0-9_]*))"
)


# -- helpers -------------------------------------------------------------------------------------
def _interpolate(value: Any, env: Mapping[str, str]) -> Any:
    """Compose-style interpolation of every string in ``value`` (``$$`` stays a literal ``$``)."""
    if isinstance(value, dict):
        return {k: _interpolate(v, env) for k, v in value.items()}
    if isinstance(value, list):
        return [_interpolate(v, env) for v in value]
    if not isinstance(value, str):
        return value

    def repl(match: re.Match[str]) -> str:
        if match.group(0) == "$$":
            return "$"
        name = match.group("braced") or match.group("bare")
        op, arg = match.group("op"), match.group("arg") or ""
        current = env.get(name)
        missing = current is None or (op is not None and op.startswith(":") and current == "")
        if op in (":-", "-"):
            return arg if missing else str(current)
        if op in (":?", "?") and missing:
            raise KeyError(f"{name}: {arg}")
        return "" if current is None else current

    return _VAR.sub(repl, value)


def _variables(value: Any) -> Iterator[tuple[str, str | None]]:
    """Yield (variable, operator) for every interpolation in ``value``."""
    if isinstance(value, dict):
        for v in value.values():
            yield from _variables(v)
    elif isinstance(value, list):
        for v in value:
            yield from _variables(v)
    elif isinstance(value, str):
        for match in _VAR.finditer(value):
            if match.group(0) != "$$":
                yield match.group("braced") or match.group("bare"), match.group("op")


def _read_env_file(path: Path) -> dict[str, str]:
    env = {}
    for line in path.read_text().splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            key, _, value = line.partition("=")
            env[key.strip()] = value.strip()
    return env


def _environment(service: Mapping[str, Any]) -> dict[str, Any]:
    env = service.get("environment") or {}
    if isinstance(env, list):
        return dict(item.split("=", 1) if "=" in item else (item, None) for item in env)
    return dict(env)


def _image_pinned(ref: str) -> bool:
    """True for ``repo:tag`` with a concrete version tag, or ``repo@sha256:...``."""
    if "@sha256:" in ref:
        return True
    last = ref.rsplit("/", 1)[-1]
    if ":" not in last:
        return False
    tag = last.split(":", 1)[1]
    return tag not in {"latest", "stable", "lts", "edge", "nightly"} and bool(re.search(r"\d", tag))


def _dockerfile_stages() -> dict[str, str]:
    """``{stage name: FROM image}`` of docker/Dockerfile."""
    stages = {}
    for match in re.finditer(r"^FROM\s+(\S+)(?:\s+AS\s+(\S+))?", DOCKERFILE.read_text(), re.MULTILINE | re.IGNORECASE):
        stages[match.group(2) or match.group(1)] = match.group(1)
    return stages


def _pom_property(name: str) -> str:
    ns = {"m": "http://maven.apache.org/POM/4.0.0"}
    node = ET.parse(ROOT / "jvm" / "pom.xml").getroot().find(f"m:properties/m:{name}", ns)
    assert node is not None and node.text, f"jvm/pom.xml has no <{name}>"
    return node.text.strip()


def _requirement_pin(name: str) -> str:
    match = re.search(rf"^{re.escape(name)}==(\S+)", (ROOT / "requirements.txt").read_text(), re.MULTILINE)
    assert match, f"requirements.txt does not pin {name}"
    return match.group(1)


# -- fixtures ------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def raw_compose() -> dict[str, Any]:
    """docker-compose.yaml as written (YAML anchors and merge keys resolved, no interpolation)."""
    return yaml.safe_load(COMPOSE_FILE.read_text())


@pytest.fixture(scope="module")
def example_env() -> dict[str, str]:
    return _read_env_file(ENV_EXAMPLE)


@pytest.fixture(scope="module")
def compose(raw_compose: dict[str, Any], example_env: dict[str, str]) -> dict[str, Any]:
    """docker-compose.yaml interpolated with the values of .env.example."""
    return _interpolate(raw_compose, example_env)


@pytest.fixture(scope="module")
def services(compose: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return compose["services"]


@pytest.fixture(scope="module")
def compose_binary() -> list[str]:
    """``docker compose`` (v2 plugin) or ``docker-compose``; skip when neither is installed."""
    docker = shutil.which("docker")
    if docker and subprocess.run([docker, "compose", "version"], capture_output=True, timeout=30).returncode == 0:
        return [docker, "compose"]
    legacy = shutil.which("docker-compose")
    if legacy:
        return [legacy]
    pytest.skip("no `docker compose` plugin or `docker-compose` binary on PATH; schema validation still ran")


def _write_env(path: Path, env: Mapping[str, str]) -> Path:
    path.write_text("".join(f"{key}={value}\n" for key, value in env.items()))
    return path


# -- (1) schema ----------------------------------------------------------------------------------
def test_vendored_schema_is_the_compose_specification() -> None:
    schema = json.loads(SCHEMA_FILE.read_text())
    assert schema["title"] == "Compose Specification"
    jsonschema.Draft201909Validator.check_schema(schema)


@pytest.mark.parametrize("stage", ["as-written", "interpolated"])
def test_compose_file_matches_compose_spec_schema(
    stage: str, raw_compose: dict[str, Any], compose: dict[str, Any]
) -> None:
    schema = json.loads(SCHEMA_FILE.read_text())
    document = raw_compose if stage == "as-written" else compose
    errors = sorted(jsonschema.Draft201909Validator(schema).iter_errors(document), key=lambda e: list(e.path))
    assert not errors, "\n".join(f"{'/'.join(map(str, e.path))}: {e.message}" for e in errors)


def test_schema_validation_rejects_an_unknown_service_key(raw_compose: dict[str, Any]) -> None:
    """Guard against a schema that accepts anything."""
    schema = json.loads(SCHEMA_FILE.read_text())
    broken = json.loads(json.dumps(raw_compose))
    broken["services"]["kafka"]["healthcheck"]["intervall"] = "10s"
    assert not jsonschema.Draft201909Validator(schema).is_valid(broken)


# -- (2) docker compose config -q ----------------------------------------------------------------
def test_compose_config_is_valid(compose_binary: list[str], example_env: dict[str, str], tmp_path: Path) -> None:
    env_file = _write_env(
        tmp_path / "generated.env",
        {k: f"generated-{k.lower()}" if "change-me" in v else v for k, v in example_env.items()},
    )
    for profile in ([], ["--profile", "informix"]):
        result = subprocess.run(
            [*compose_binary, "--env-file", str(env_file), "-f", str(COMPOSE_FILE), *profile, "config", "-q"],
            capture_output=True,
            text=True,
            timeout=120,
            cwd=ROOT,
        )
        assert result.returncode == 0, result.stderr


def test_compose_config_fails_without_a_secret(
    compose_binary: list[str], example_env: dict[str, str], tmp_path: Path
) -> None:
    env = {k: v for k, v in example_env.items() if k != "AIRFLOW_JWT_SECRET"}
    result = subprocess.run(
        [
            *compose_binary,
            "--env-file",
            str(_write_env(tmp_path / "partial.env", env)),
            "-f",
            str(COMPOSE_FILE),
            "config",
            "-q",
        ],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
    )
    assert result.returncode != 0
    assert "AIRFLOW_JWT_SECRET" in result.stderr


# -- images --------------------------------------------------------------------------------------
def test_every_image_is_pinned(services: dict[str, dict[str, Any]]) -> None:
    unpinned = {
        name: svc.get("image")
        for name, svc in services.items()
        if not (svc.get("image") and _image_pinned(svc["image"]))
    }
    assert not unpinned, f"services without a pinned image: {unpinned}"


def test_every_dockerfile_base_image_is_pinned() -> None:
    stages = _dockerfile_stages()
    assert set(stages) == {"jvm-build", "connect", "cluster", "spark", "airflow"}
    assert all(_image_pinned(image) for image in stages.values()), stages


def test_built_services_use_the_dockerfile_targets(services: dict[str, dict[str, Any]]) -> None:
    targets = {name: svc["build"]["target"] for name, svc in services.items() if "build" in svc}
    assert targets == {
        "connect": "connect",
        "s3proxy": "cluster",
        "iceberg-rest": "cluster",
        "spark-master": "spark",
        "spark-worker": "spark",
        **dict.fromkeys(AIRFLOW_SERVICES, "airflow"),
    }
    for name in targets:
        assert services[name]["build"]["dockerfile"] == "docker/Dockerfile"
        assert services[name]["build"]["context"] == "."


def test_image_versions_match_the_project_pins(services: dict[str, dict[str, Any]]) -> None:
    stages = _dockerfile_stages()
    kafka = _pom_property("kafka.version")
    assert services["kafka"]["image"] == f"apache/kafka:{kafka}"
    assert stages["connect"] == f"apache/kafka:{kafka}"
    # the cluster servers and Spark's S3 jars: jvm/cluster/pom.xml, built as `make cluster-jars` builds it
    assert "-f jvm/cluster/pom.xml -Dcdclake.jvm.dir=/out package" in DOCKERFILE.read_text()
    assert re.fullmatch(r"eclipse-temurin:17\.[\d.]+_\d+-jre-\w+", stages["cluster"]), stages["cluster"]
    assert stages["airflow"] == f"apache/airflow:{_requirement_pin('apache-airflow')}-python3.11"
    spark_minor = ".".join(_requirement_pin("pyspark").split(".")[:2])
    assert re.fullmatch(
        rf"apache/spark:{re.escape(spark_minor)}\.\d+-scala{_pom_property('scala.binary.version')}"
        r"-java17-python3-ubuntu",
        stages["spark"],
    ), stages["spark"]
    assert re.fullmatch(r"maven:3\.9\.\d+-eclipse-temurin-17", stages["jvm-build"])
    assert re.fullmatch(r"mysql:8\.4\.\d+", services["mysql"]["image"])
    assert re.fullmatch(r"postgres:17\.\d+", services["postgres"]["image"])
    assert re.fullmatch(r"mongo:(7|8)\.0\.\d+", services["mongodb"]["image"])
    assert re.fullmatch(r"icr\.io/informix/informix-developer-database:15\.0\.[\w.]+", services["informix"]["image"])


# -- health and ordering -------------------------------------------------------------------------
def test_every_long_running_service_has_a_healthcheck(services: dict[str, dict[str, Any]]) -> None:
    one_shot = {name for name, svc in services.items() if svc.get("restart") == "no"}
    assert one_shot == ONE_SHOT_SERVICES
    missing = [
        name
        for name, svc in services.items()
        if name not in one_shot and (not svc.get("healthcheck", {}).get("test") or svc["healthcheck"].get("disable"))
    ]
    assert not missing, f"long-running services without a healthcheck: {missing}"


def test_depends_on_waits_for_health_or_completion(services: dict[str, dict[str, Any]]) -> None:
    for name, svc in services.items():
        depends_on = svc.get("depends_on", {})
        assert isinstance(depends_on, dict), f"{name}: use depends_on with conditions"
        for dep, spec in depends_on.items():
            assert dep in services, f"{name} depends on unknown service {dep}"
            expected = "service_completed_successfully" if dep in ONE_SHOT_SERVICES else "service_healthy"
            assert spec["condition"] == expected, f"{name} -> {dep}"


def test_key_dependencies(services: dict[str, dict[str, Any]]) -> None:
    assert "kafka" in services["connect"]["depends_on"]
    assert {"postgres", "s3proxy"} <= set(services["iceberg-rest"]["depends_on"])
    assert "spark-master" in services["spark-worker"]["depends_on"]
    assert "airflow-db" in services["airflow-init"]["depends_on"]
    for name in AIRFLOW_SERVICES - {"airflow-init"}:
        assert "airflow-init" in services[name]["depends_on"], name
    assert {"kafka", "connect", "spark-master", "iceberg-rest"} <= set(services["airflow-scheduler"]["depends_on"])


def test_all_services_share_one_network(compose: dict[str, Any], services: dict[str, dict[str, Any]]) -> None:
    assert set(compose["networks"]) == {"cdclake"}
    assert all(svc.get("networks") == ["cdclake"] for svc in services.values())


# -- secrets -------------------------------------------------------------------------------------
def test_secrets_come_only_from_required_variables(raw_compose: dict[str, Any]) -> None:
    """Secret-named keys hold exactly one ${VAR:?...} reference: no literals, no defaults."""
    offenders = {}
    for name, svc in raw_compose["services"].items():
        for key, value in _environment(svc).items():
            if SECRET_KEY.search(key) and not REQUIRED_REF.match(str(value)):
                offenders[f"{name}.{key}"] = value
    assert not offenders, f"secret values not taken from .env: {offenders}"


def test_credentials_inside_connection_strings_are_references(raw_compose: dict[str, Any]) -> None:
    for name, svc in raw_compose["services"].items():
        for key, value in _environment(svc).items():
            text = str(value)
            for password in re.findall(r'"password":\s*"([^"]*)"', text):
                assert REQUIRED_REF.match(password), f"{name}.{key}: literal password in JSON"
            for password in re.findall(r"://[^:/@\s]+:([^@\s]+)@", text):
                assert REQUIRED_REF.match(password), f"{name}.{key}: literal password in URI"


def test_no_literal_password_anywhere_in_the_text() -> None:
    """Every YAML `...PASSWORD...:`/`...SECRET...:` line (bar *_FILE paths) is a ${VAR} reference."""
    text = COMPOSE_FILE.read_text()
    secret_lines = re.findall(r"(?im)^\s*([\w.-]*(?:password|secret)[\w.-]*)\s*:\s*(.*)$", text)
    assert secret_lines, "expected secret-named settings"
    literal = [
        (key, value)
        for key, value in secret_lines
        if not key.upper().endswith("_FILE") and not value.strip("'\"").startswith("${")
    ]
    assert not literal, f"literal secret values: {literal}"
    assert not re.search(r"(?im)^\s*env_file:", text), "use ${VAR} interpolation from .env, not env_file"


def test_every_variable_is_documented_in_env_example(raw_compose: dict[str, Any], example_env: dict[str, str]) -> None:
    used = dict(_variables(raw_compose))
    required = {var for var, op in used.items() if op in (":?", "?")}
    assert required <= set(example_env), f"missing from .env.example: {sorted(required - set(example_env))}"
    assert set(example_env) <= set(used), f"unused in docker-compose.yaml: {sorted(set(example_env) - set(used))}"


def test_env_example_holds_placeholders_only(example_env: dict[str, str]) -> None:
    for key, value in example_env.items():
        if SECRET_KEY.search(key) and key != "CDC_S3_ACCESS_KEY_ID":
            assert value.startswith("change-me"), f"{key} in .env.example must be a change-me placeholder"


def test_real_env_file_is_ignored() -> None:
    assert ".env" in (ROOT / ".gitignore").read_text().splitlines()
    ignore = [line for line in DOCKERIGNORE.read_text().splitlines() if line and not line.startswith("#")]
    assert ignore[0] == "*", "the build context is an allow-list"
    assert not [line for line in ignore if line.startswith("!.env")]


# -- Kafka Connect -------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def worker_config() -> dict[str, str]:
    parser = configparser.ConfigParser(interpolation=None, delimiters=("=",))
    parser.optionxform = str  # type: ignore[assignment,method-assign]
    parser.read_string("[worker]\n" + CONNECT_PROPERTIES.read_text())
    return dict(parser["worker"])


def test_connect_worker_has_the_config_providers(worker_config: dict[str, str]) -> None:
    assert worker_config["config.providers"] == "env,file,dir"
    assert worker_config["config.providers.env.class"] == "org.apache.kafka.common.config.provider.EnvVarConfigProvider"
    assert worker_config["config.providers.file.class"] == "org.apache.kafka.common.config.provider.FileConfigProvider"
    assert worker_config["config.providers.dir.class"] == (
        "org.apache.kafka.common.config.provider.DirectoryConfigProvider"
    )


def test_connect_worker_settings(worker_config: dict[str, str]) -> None:
    assert worker_config["bootstrap.servers"] == "kafka:9092"
    assert (
        worker_config["key.converter"]
        == worker_config["value.converter"]
        == ("org.apache.kafka.connect.json.JsonConverter")
    )
    for topic in ("config", "offset", "status"):
        assert worker_config[f"{topic}.storage.replication.factor"] == "1"
    assert worker_config["listeners"].endswith(":8083")
    assert worker_config["plugin.path"] == "/opt/connect-plugins"
    assert not any("password" in key.lower() for key in worker_config)


def test_connect_image_runs_connect_distributed_with_that_file(services: dict[str, dict[str, Any]]) -> None:
    connect_stage = DOCKERFILE.read_text().split(" AS connect", 1)[1].split("\nFROM ", 1)[0]
    assert "org.apache.kafka.connect.cli.ConnectDistributed" in connect_stage
    assert "/opt/connect/connect-distributed.properties" in connect_stage
    assert "docker/connect/connect-distributed.properties" in connect_stage
    assert "/out/connect-plugins/ /opt/connect-plugins/" in connect_stage
    assert "mvn -B -q -s jvm/settings.xml -f jvm/pom.xml -Dcdclake.jvm.dir=/out package" in DOCKERFILE.read_text()
    env = _environment(services["connect"])
    assert {"CDC_POSTGRES_DEBEZIUM_PASSWORD", "CDC_MYSQL_DEBEZIUM_PASSWORD", "CDC_MONGODB_DEBEZIUM_PASSWORD"} <= set(
        env
    )
    assert all(key.startswith("CDC_") for key in env if "PASSWORD" in key)


def test_env_provider_reads_only_the_capture_passwords(worker_config: dict[str, str]) -> None:
    pattern = re.compile(worker_config["config.providers.env.param.allowlist.pattern"])
    assert pattern.match("CDC_POSTGRES_DEBEZIUM_PASSWORD") and pattern.match("CDC_MYSQL_DEBEZIUM_PASSWORD")
    for other in ("CDC_MYSQL_ROOT_PASSWORD", "CDC_CONNECT_PASSWORD", "CDC_S3_SECRET_ACCESS_KEY", "PATH"):
        assert not pattern.match(other), other
    for provider in ("file", "dir"):
        assert worker_config[f"config.providers.{provider}.param.allowed.paths"] == "/opt/connect/secrets"


def test_connect_rest_api_asks_for_basic_auth(
    worker_config: dict[str, str], services: dict[str, dict[str, Any]]
) -> None:
    assert worker_config["rest.extension.classes"] == BASIC_AUTH_EXTENSION
    jaas = (ROOT / "docker" / "connect" / "rest-jaas.conf").read_text()
    assert LOGIN_MODULE in jaas and 'file="/opt/connect/auth/rest-credentials.properties"' in jaas
    entrypoint = (ROOT / "docker" / "connect" / "entrypoint.sh").read_text()
    assert "unset CDC_CONNECT_USER CDC_CONNECT_PASSWORD" in entrypoint
    assert "-Djava.security.auth.login.config=/opt/connect/rest-jaas.conf" in entrypoint
    assert "/opt/connect/entrypoint.sh" in DOCKERFILE.read_text().split(" AS connect", 1)[1].split("\nFROM ", 1)[0]
    env = _environment(services["connect"])
    assert env["CDC_CONNECT_USER"] == "cdclake" and env["CDC_CONNECT_PASSWORD"]
    assert "$CDC_CONNECT_PASSWORD" in " ".join(services["connect"]["healthcheck"]["test"])
    # the Airflow connection carries the same credentials
    airflow = json.loads(_environment(services["airflow-scheduler"])["AIRFLOW_CONN_KAFKA_CONNECT_DEFAULT"])
    assert (airflow["login"], airflow["password"]) == ("cdclake", env["CDC_CONNECT_PASSWORD"])


def test_the_local_stacks_worker_has_the_same_security_settings(worker_config: dict[str, str], tmp_path: Path) -> None:
    """What runs here is what compose runs: REST authentication, config providers and their restrictions."""
    from cdclake.stack.config import StackConfig, load_or_create_secrets
    from cdclake.stack.connect import ConnectService

    config = StackConfig(state_dir=tmp_path / "stack", jvm_dir=tmp_path / "jvm")
    service = ConnectService(config, None, load_or_create_secrets(config))  # type: ignore[arg-type]
    local = dict(
        line.split("=", 1) for line in service.worker_properties().splitlines() if "=" in line and line[0] != "#"
    )
    keys = [k for k in worker_config if k.startswith(("config.providers", "rest.extension"))]
    assert len(keys) >= 8
    differ = {
        k: (local.get(k), worker_config[k])
        for k in keys
        if local.get(k) != worker_config[k] and not k.endswith("allowed.paths")
    }
    assert differ == {}
    assert local["config.providers.file.param.allowed.paths"] == str(service.secrets_dir)


# -- profiles, Airflow, sources ------------------------------------------------------------------
def test_informix_is_only_in_its_profile(services: dict[str, dict[str, Any]]) -> None:
    profiled = {name: svc["profiles"] for name, svc in services.items() if "profiles" in svc}
    assert profiled == {"informix": ["informix"]}
    assert not [name for name, svc in services.items() if "informix" in svc.get("depends_on", {})]


def test_airflow_services_mount_the_project_folders(services: dict[str, dict[str, Any]]) -> None:
    for name in AIRFLOW_SERVICES:
        mounts = dict(v.split(":")[:2] for v in services[name]["volumes"])
        for source, target in AIRFLOW_MOUNTS.items():
            assert mounts.get(source) == target, f"{name} does not mount {source}"
            assert (ROOT / source).is_dir(), f"{source} missing in the checkout"


def test_airflow_commands(services: dict[str, dict[str, Any]]) -> None:
    assert services["airflow-apiserver"]["command"] == ["api-server"]
    assert services["airflow-scheduler"]["command"] == ["scheduler"]
    assert services["airflow-dag-processor"]["command"] == ["dag-processor"]
    assert services["airflow-triggerer"]["command"] == ["triggerer"]
    assert "airflow db migrate" in services["airflow-init"]["command"][0]


def test_airflow_connections_and_lake_settings(services: dict[str, dict[str, Any]]) -> None:
    env = _environment(services["airflow-scheduler"])
    assert env["AIRFLOW__CORE__EXECUTOR"] == "LocalExecutor"
    assert env["AIRFLOW__DATABASE__SQL_ALCHEMY_CONN"].endswith("@airflow-db:5432/airflow")
    assert env["AIRFLOW_CONN_SPARK_DEFAULT"] == "spark://spark-master:7077"
    connect = json.loads(env["AIRFLOW_CONN_KAFKA_CONNECT_DEFAULT"])
    assert (connect["conn_type"], connect["host"], connect["port"]) == ("kafka_connect", "connect", 8083)
    kafka = json.loads(env["AIRFLOW_CONN_KAFKA_DEFAULT"])
    assert kafka["conn_type"] == "kafka" and kafka["extra"]["bootstrap.servers"] == "kafka:9092"
    for conn_id, host in (("CDC_POSTGRES", "postgres"), ("CDC_MYSQL", "mysql"), ("CDC_MONGODB", "mongodb")):
        conn = json.loads(env[f"AIRFLOW_CONN_{conn_id}"])
        assert (conn["host"], conn["login"]) == (host, "cdc_signal"), conn_id
    for conn_id, host in (("CDC_POSTGRES_READER", "postgres"), ("CDC_MYSQL_READER", "mysql")):
        conn = json.loads(env[f"AIRFLOW_CONN_{conn_id}"])
        assert (conn["host"], conn["login"]) == (host, "cdc_reader"), conn_id
    # the deployment's sources are specs whose database runs without a profile
    from cdclake.connectors import load_specs
    from cdclake.orchestration.deployment import enabled_specs
    from cdclake.settings import Settings

    deployment = Settings.from_env({"CDC_SOURCES": env["CDC_SOURCES"]})
    sources = [spec.name for spec in enabled_specs(load_specs(), deployment)]
    assert sorted(sources) == ["mongodb", "mysql", "postgres"]
    assert all(not services[name].get("profiles") for name in sources)
    assert env["CDC_LAKE_KIND"] == "rest"
    assert env["CDC_LAKE_URI"] == "http://iceberg-rest:8181"
    assert env["CDC_LAKE_S3_ENDPOINT"] == "http://s3proxy:9000"
    for key in (
        "CDC_LAKE_WAREHOUSE",
        "CDC_LAKE_S3_ACCESS_KEY_ID",
        "CDC_LAKE_S3_SECRET_ACCESS_KEY",
        "CDC_LAKE_S3_REGION",
    ):
        assert env[key], key
    # every Airflow component sees the same settings
    for name in AIRFLOW_SERVICES:
        assert env.items() <= _environment(services[name]).items(), name


def test_the_airflow_image_installs_the_airflow_distribution() -> None:
    """Its entry points register the Kafka Connect connection type and the CDC view."""
    text = DOCKERFILE.read_text()
    assert "pip install --no-cache-dir --no-deps ./plugins" in text
    assert "!plugins/" in DOCKERIGNORE.read_text().splitlines()


def test_lake_settings_are_read_by_the_project(
    services: dict[str, dict[str, Any]], monkeypatch: pytest.MonkeyPatch
) -> None:
    from cdclake.lake import LakeConfig

    for key, value in _environment(services["airflow-scheduler"]).items():
        if key.startswith("CDC_LAKE_"):
            monkeypatch.setenv(key, str(value))
    lake = LakeConfig.from_env()
    assert (lake.kind, lake.uri, lake.s3["s3.endpoint"]) == ("rest", "http://iceberg-rest:8181", "http://s3proxy:9000")


def test_source_databases_are_configured_for_cdc(services: dict[str, dict[str, Any]]) -> None:
    mysql_cnf = (ROOT / "docker/mysql/conf.d/cdclake.cnf").read_text()
    for setting in (
        "binlog_format=ROW",
        "binlog_row_image=FULL",
        "gtid_mode=ON",
        "enforce_gtid_consistency=ON",
        "server_id=",
    ):
        assert setting in mysql_cnf
    mysql_init = (ROOT / "docker/mysql/init/01-cdclake.sh").read_text()
    assert (
        "GRANT SELECT, RELOAD, SHOW DATABASES, REPLICATION SLAVE, REPLICATION CLIENT ON *.* TO 'debezium'@'%';"
        in mysql_init
    )
    assert "GRANT INSERT ON demo.debezium_signal TO 'cdc_signal'@'%';" in mysql_init
    assert len(re.findall(r"GRANT .* TO 'cdc_signal'", mysql_init)) == 1

    assert "wal_level=logical" in services["postgres"]["command"]
    pg_init = (ROOT / "docker/postgres/init/01-cdclake.sh").read_text()
    for statement in (
        "CREATE ROLE debezium WITH LOGIN REPLICATION",
        "CREATE PUBLICATION cdclake_pub",
        "GRANT INSERT ON inventory.debezium_signal TO cdc_signal",
        "CREATE SCHEMA IF NOT EXISTS inventory",
    ):
        assert statement in pg_init
    assert "SUPERUSER" not in pg_init

    assert services["mongodb"]["command"][:3] == ["mongod", "--replSet", "rs0"]
    health = (ROOT / "docker/mongodb/healthcheck.js").read_text()
    assert "rs0" in health and "isWritablePrimary" in health
    assert "syscdcv1.sql" in (ROOT / "docker/informix/informix_post_init.sh").read_text()


def test_mounted_host_paths_exist(services: dict[str, dict[str, Any]]) -> None:
    for name, svc in services.items():
        for volume in svc.get("volumes", []):
            source = volume.split(":", 1)[0]
            if source.startswith("./"):
                assert (ROOT / source).exists(), f"{name}: {source} does not exist"


# -- the cluster profile: compose runs what `cdclake stack up --profile cluster` runs ---------------
ENTRYPOINT = ROOT / "docker" / "cluster" / "entrypoint.sh"


def _cluster_services(tmp_path: Path) -> tuple[Any, Any, dict[str, str]]:
    from cdclake.stack.cluster import IcebergRestService, S3ProxyService
    from cdclake.stack.config import CLUSTER_SECRETS, StackConfig

    config = StackConfig(state_dir=tmp_path / "state", jvm_dir=tmp_path / "jvm")
    secrets = {key: f"secret{n}" for n, key in enumerate(CLUSTER_SECRETS)}
    return S3ProxyService(config, object(), secrets), IcebergRestService(config, object(), secrets), secrets  # type: ignore[arg-type]


def test_the_rest_catalog_has_the_cluster_profiles_properties(
    services: dict[str, dict[str, Any]], tmp_path: Path
) -> None:
    """The same ``CATALOG_*`` keys, with the same values except the hosts (service names instead of loopback)."""
    _, rest, _ = _cluster_services(tmp_path)
    local = {k: v for k, v in rest.server_environment().items() if k.startswith("CATALOG_")}
    compose = {k: str(v) for k, v in _environment(services["iceberg-rest"]).items() if k.startswith("CATALOG_")}
    assert set(compose) == set(local)
    hosts = {"CATALOG_URI", "CATALOG_S3_ENDPOINT"}
    assert {k: v for k, v in compose.items() if k not in hosts} == {k: v for k, v in local.items() if k not in hosts}
    assert compose["CATALOG_URI"] == local["CATALOG_URI"].replace(
        f"{rest.config.host}:{rest.config.postgres_port}", "postgres:5432"
    )
    assert compose["CATALOG_S3_ENDPOINT"] == "http://s3proxy:9000"
    # its secrets through the same channels: a .pgpass file and AWS's variables, from the same names as secrets.env
    launcher = re.search(r"-cp \S+ (dev\.cdclake\.rest\.\w+)", ENTRYPOINT.read_text())
    assert launcher and launcher.group(1) == "dev.cdclake.rest.RestCatalogLauncher"
    assert {"PGPASSFILE", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"} <= set(rest.server_environment())
    for name in ("PGPASSFILE=", "AWS_ACCESS_KEY_ID=", "AWS_SECRET_ACCESS_KEY="):
        assert name in ENTRYPOINT.read_text(), name


def test_the_object_store_has_the_cluster_profiles_properties(tmp_path: Path) -> None:
    s3proxy, _, _ = _cluster_services(tmp_path)
    local = {line.split("=", 1)[0] for line in s3proxy.properties().splitlines() if line}
    script = ENTRYPOINT.read_text()
    written = script[script.index("<<PROPERTIES") : script.index("\nPROPERTIES\n")]
    assert {line.split("=", 1)[0] for line in written.splitlines()[1:] if line} == local


def test_the_secrets_and_settings_have_the_local_stacks_names(
    services: dict[str, dict[str, Any]], example_env: dict[str, str], tmp_path: Path
) -> None:
    from cdclake.settings import Settings
    from cdclake.stack.cluster import lake_environment
    from cdclake.stack.config import CLUSTER_SECRETS, S3_REGION, WAREHOUSE_BUCKET, StackConfig

    assert set(CLUSTER_SECRETS) <= set(example_env)
    defaults = Settings.from_env({})
    worker = _environment(services["spark-worker"])
    assert (worker["SPARK_WORKER_CORES"], worker["SPARK_WORKER_MEMORY"]) == (
        str(defaults.spark_worker_cores),
        defaults.spark_worker_memory,
    )
    airflow = _environment(services["airflow-scheduler"])
    local = lake_environment(StackConfig(tmp_path, tmp_path), dict.fromkeys(CLUSTER_SECRETS, "x"))
    assert set(local) <= set(airflow)
    assert (airflow["CDC_LAKE_WAREHOUSE"], airflow["CDC_LAKE_S3_REGION"]) == (f"s3://{WAREHOUSE_BUCKET}/", S3_REGION)
    assert "-Dspark.master.rest.enabled=false" in _environment(services["spark-master"])["SPARK_MASTER_OPTS"]


def test_the_images_entrypoint_runs_s3proxy_from_the_local_jars(tmp_path: Path) -> None:
    """The compose image's script, run here on the jars `make cluster-jars` built: s3proxy answers S3 requests
    with the key pair it was given, and the secrets are in a private file, not on its command line."""
    import socket
    import time

    import requests

    from cdclake.paths import jvm_dir

    jars = jvm_dir() / "cluster"
    if not any((jars / "s3proxy").glob("s3proxy-*.jar")):
        pytest.skip("no s3proxy jar: run `make cluster-jars`")
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    env = {
        "PATH": os.environ["PATH"],
        "CDC_CLUSTER_JARS": str(jars),
        "CDC_S3_DATA": str(tmp_path / "data"),
        "CDC_RUN_DIR": str(tmp_path),
        "CDC_S3_PORT": str(port),
        "CDC_S3_ACCESS_KEY_ID": "cdclake",
        "CDC_S3_SECRET_ACCESS_KEY": "not-a-real-secret",
    }
    proc = subprocess.Popen(
        ["bash", str(ENTRYPOINT), "s3proxy"], env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT
    )
    try:
        deadline, status = time.monotonic() + 60, None
        while status is None and time.monotonic() < deadline and proc.poll() is None:
            try:
                status = requests.get(f"http://127.0.0.1:{port}/warehouse", timeout=2).status_code
            except requests.ConnectionError:
                time.sleep(0.5)
        assert status == 403, f"s3proxy did not refuse an unsigned request: {status}"
        assert (tmp_path / "data" / "warehouse").is_dir()
        assert (tmp_path / "s3proxy.properties").stat().st_mode & 0o077 == 0
        assert "not-a-real-secret" not in Path(f"/proc/{proc.pid}/cmdline").read_text()
        assert "CDC_S3_SECRET_ACCESS_KEY" not in Path(f"/proc/{proc.pid}/environ").read_text()
    finally:
        proc.kill()
        proc.wait(timeout=30)
