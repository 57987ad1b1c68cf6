"""Loading and validating connector specs: the shipped files parse; each invalid case names file + key."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from cdclake.connectors import (
    ConnectorKind,
    LakeMode,
    SchemaPolicy,
    load_spec,
    load_specs,
    parse_partition,
    resolve_spec_path,
    spec_dir,
)
from cdclake.exceptions import ConnectorSpecError

PROJECT_ROOT = Path(__file__).resolve().parents[3]
SPEC_DIR = PROJECT_ROOT / "include" / "connectors"


def _valid_pg() -> dict[str, Any]:
    return {
        "name": "postgres",
        "connector": "postgresql",
        "connection_id": "cdc_postgres",
        "capture_user": "debezium",
        "capture_password": "${env:CDC_POSTGRES_DEBEZIUM_PASSWORD}",
        "topic_prefix": "pg",
        "database": "demo",
        "schema": "inventory",
        "tables": [{"name": "inventory.customers"}, {"name": "inventory.orders", "lake": {"mode": "append"}}],
        "signal_table": "inventory.debezium_signal",
    }


def _write(tmp_path: Path, raw: dict[str, Any], name: str = "postgres.yaml") -> Path:
    path = tmp_path / name
    path.write_text(yaml.safe_dump(raw), encoding="utf-8")
    return path


# ---- shipped specs -----------------------------------------------------------------------------


def test_default_spec_dir_is_project_include_connectors() -> None:
    assert spec_dir() == SPEC_DIR


def test_all_shipped_specs_load() -> None:
    specs = load_specs(SPEC_DIR)
    assert sorted(specs) == ["informix", "mariadb", "mongodb", "mysql", "postgres"]
    assert {s.connector for s in specs.values()} == set(ConnectorKind)
    assert len({s.topic_prefix for s in specs.values()}) == 5


def test_postgres_spec_matches_local_stack() -> None:
    spec = load_spec("postgres", SPEC_DIR)
    assert spec.connector is ConnectorKind.POSTGRESQL
    assert spec.connection_id == "cdc_postgres"
    assert spec.database == "demo"
    assert spec.schema_name == "inventory"
    assert spec.table_names == (
        "inventory.customers",
        "inventory.orders",
        "inventory.products",
        "inventory.order_items",
        "inventory.all_types",
    )
    assert spec.signal_table == "inventory.debezium_signal"
    assert spec.captured_collections[-1] == "inventory.debezium_signal"
    assert spec.capture_password == "${env:CDC_POSTGRES_DEBEZIUM_PASSWORD}"
    assert spec.topic_prefix == "pg"
    assert spec.source_path == SPEC_DIR / "postgres.yaml"
    customers = spec.table("inventory.customers")
    assert customers.lake.mode is LakeMode.UPSERT
    assert customers.lake.schema_policy is SchemaPolicy.EVOLVE
    assert [str(f) for f in customers.lake.partition_fields()] == ["bucket(4, id)"]


def test_mariadb_spec_matches_local_stack() -> None:
    spec = load_spec(SPEC_DIR / "mariadb.yaml")
    assert (spec.connection_id, spec.topic_prefix, spec.signal_table) == (
        "cdc_mariadb",
        "maria",
        "demo.debezium_signal",
    )
    assert spec.table_names == ("demo.customers", "demo.orders", "demo.products", "demo.order_items", "demo.all_types")


def test_derived_topic_names() -> None:
    pg = load_spec("postgres", SPEC_DIR)
    ifx = load_spec("informix", SPEC_DIR)
    assert pg.topic_for("inventory.orders") == "pg.inventory.orders"
    assert ifx.topic_for("demo.informix.orders") == "ifx.informix.orders"
    assert (pg.signal_topic, pg.notification_topic, pg.transaction_topic) == (
        "pg-signal",
        "pg.notifications",
        "pg.transaction",
    )
    assert pg.schema_change_topic is None
    assert ifx.schema_change_topic == "ifx"
    assert pg.heartbeat_topic == "__debezium-heartbeat.pg"


def test_resolve_spec_path_variants(tmp_path: Path) -> None:
    assert resolve_spec_path("postgres", tmp_path) == tmp_path / "postgres.yaml"
    assert resolve_spec_path("postgres.yaml", tmp_path) == tmp_path / "postgres.yaml"
    assert resolve_spec_path(tmp_path / "x.yaml") == tmp_path / "x.yaml"


def test_tables_may_be_plain_strings(tmp_path: Path) -> None:
    raw = _valid_pg() | {"tables": ["inventory.customers"]}
    spec = load_spec(_write(tmp_path, raw))
    assert spec.tables[0].lake.mode is LakeMode.UPSERT
    assert spec.tables[0].lake.tombstone_retention_days == 7.0


def test_tombstone_retention_is_set_per_table_or_kept_forever(tmp_path: Path) -> None:
    raw = _valid_pg()
    raw["tables"][0]["lake"] = {"tombstone_retention_days": 1.5}
    raw["tables"][1]["lake"] = {"tombstone_retention_days": None}
    spec = load_spec(_write(tmp_path, raw))
    assert [t.lake.tombstone_retention_days for t in spec.tables] == [1.5, None]


def test_spec_is_frozen(tmp_path: Path) -> None:
    spec = load_spec(_write(tmp_path, _valid_pg()))
    with pytest.raises(ValueError, match="frozen"):
        spec.name = "other"  # type: ignore[misc]


# ---- invalid cases: every error names the file and the key path --------------------------------

INVALID_CASES = [
    # (change to the valid spec, expected key path, expected message fragment)
    (
        lambda r: r["tables"][1].__setitem__("lake", {"mode": "merge"}),
        "tables[1].lake.mode",
        "must be one of upsert, append, scd2",
    ),
    (
        lambda r: r["tables"][0].__setitem__("lake", {"schema_policy": "ignore"}),
        "tables[0].lake.schema_policy",
        "must be one of evolve, fail, quarantine",
    ),
    (
        lambda r: r["tables"][0].__setitem__("lake", {"partitioning": ["bucket(x, id)"]}),
        "tables[0].lake.partitioning",
        "is not a partition transform",
    ),
    (
        lambda r: r["tables"][0].__setitem__("lake", {"tombstone_retention_days": -1}),
        "tables[0].lake.tombstone_retention_days",
        "greater than or equal to 0",
    ),
    (lambda r: r.__setitem__("capture_password", "hunter2"), "capture_password", "literal passwords are not allowed"),
    (lambda r: r.__setitem__("connector", "oracle"), "connector", "must be one of postgresql, mysql"),
    (lambda r: r.pop("topic_prefix"), "topic_prefix", "required key is missing"),
    (lambda r: r.__setitem__("colour", "blue"), "colour", "unknown key"),
    (lambda r: r["tables"].append({"name": "customers"}), "tables[2].name", "write it as schema.table"),
    (lambda r: r["tables"].append({"name": "public.customers"}), "tables[2].name", "is not in schema 'inventory'"),
    (lambda r: r["tables"].append({"name": "inventory.orders"}), "tables[2].name", "is listed twice"),
    (
        lambda r: r["tables"].append({"name": "inventory.debezium_signal"}),
        "tables[2].name",
        "captured automatically",
    ),
    (lambda r: r.__setitem__("signal_table", "debezium_signal"), "signal_table", "write it as schema.table"),
    (lambda r: r.__setitem__("snapshot_mode", "schema_only"), "snapshot_mode", "must be one of always"),
    (lambda r: r.__setitem__("signal_channels", ["kafka"]), "signal_channels", "must include 'source'"),
    (lambda r: r.__setitem__("server_id", 5), "server_id", "only applies to the mysql and mariadb"),
    (lambda r: r.__setitem__("extra", {"topic.prefix": "x"}), "extra.topic.prefix", "overrides a generated property"),
    (lambda r: r.__setitem__("extra", {"ssl.key.password": "pw"}), "extra.ssl.key.password", "looks like a secret"),
    (lambda r: r.__setitem__("extra_overrides", ["snapshot.mode"]), "extra_overrides[0]", "is not a key of extra"),
    (lambda r: r.__setitem__("heartbeat_interval_ms", -1), "heartbeat_interval_ms", "greater than or equal to 0"),
    (lambda r: r.__setitem__("poll_interval_ms", 0), "poll_interval_ms", "greater than or equal to 1"),
    (lambda r: r.__setitem__("tables", []), "tables", "at least 1 item"),
]


@pytest.mark.parametrize(("mutate", "key", "fragment"), INVALID_CASES, ids=[c[1] + ":" + c[2] for c in INVALID_CASES])
def test_invalid_spec_error_names_file_and_key(tmp_path: Path, mutate: Any, key: str, fragment: str) -> None:
    raw = _valid_pg()
    mutate(raw)
    path = _write(tmp_path, raw)
    with pytest.raises(ConnectorSpecError) as info:
        load_spec(path)
    message = str(info.value)
    assert f"{path}: {key}: " in message
    assert fragment in message


def test_error_path_is_relative_to_project_for_project_files() -> None:
    # The brief's example form: include/connectors/postgres.yaml: tables[1].lake.mode: ...
    raw = yaml.safe_load((SPEC_DIR / "postgres.yaml").read_text())
    raw["tables"][1]["lake"]["mode"] = "merge"
    from cdclake.connectors import parse_spec

    with pytest.raises(ConnectorSpecError) as info:
        parse_spec(raw, source=SPEC_DIR / "postgres.yaml")
    assert (
        str(info.value) == "include/connectors/postgres.yaml: tables[1].lake.mode: must be one of upsert, append, scd2"
    )


def test_extra_override_allowed_when_listed(tmp_path: Path) -> None:
    raw = _valid_pg() | {"extra": {"snapshot.mode": "no_data"}, "extra_overrides": ["snapshot.mode"]}
    assert load_spec(_write(tmp_path, raw)).extra == {"snapshot.mode": "no_data"}


def test_extra_secret_reference_is_allowed(tmp_path: Path) -> None:
    raw = _valid_pg() | {"extra": {"database.sslpassword": "${file:/opt/secrets/pg.properties:sslpassword}"}}
    assert load_spec(_write(tmp_path, raw)).extra["database.sslpassword"].startswith("${file:")


def test_several_problems_are_all_reported(tmp_path: Path) -> None:
    raw = _valid_pg() | {"snapshot_mode": "bogus", "signal_channels": ["kafka"]}
    with pytest.raises(ConnectorSpecError) as info:
        load_spec(_write(tmp_path, raw))
    assert "snapshot_mode" in str(info.value)
    assert "signal_channels" in str(info.value)


def test_missing_file_and_bad_yaml(tmp_path: Path) -> None:
    with pytest.raises(ConnectorSpecError, match="connector spec not found"):
        load_spec(tmp_path / "nope.yaml")
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: [unclosed\n")
    with pytest.raises(ConnectorSpecError, match=f"{bad}: not valid YAML"):
        load_spec(bad)
    scalar = tmp_path / "scalar.yaml"
    scalar.write_text("just a string\n")
    with pytest.raises(ConnectorSpecError, match="must be a YAML mapping"):
        load_spec(scalar)


def test_duplicate_topic_prefix_across_files(tmp_path: Path) -> None:
    _write(tmp_path, _valid_pg(), "a.yaml")
    _write(tmp_path, _valid_pg() | {"name": "postgres2"}, "b.yaml")
    with pytest.raises(ConnectorSpecError, match=r"b\.yaml: topic_prefix: 'pg' is already used by .*a\.yaml"):
        load_specs(tmp_path)


@pytest.mark.parametrize(
    ("connector", "table", "fragment"),
    [
        ("mysql", "other.customers", "is not in database 'demo'"),
        ("mongodb", "demo.customers.extra", "write it as database.collection"),
        ("informix", "demo.customers", "write it as database.owner.table"),
    ],
)
def test_table_shape_per_connector(tmp_path: Path, connector: str, table: str, fragment: str) -> None:
    raw = _valid_pg() | {"connector": connector, "tables": [table], "schema": None}
    raw["signal_table"] = {"informix": "demo.informix.debezium_signal"}.get(connector, "demo.debezium_signal")
    raw.pop("schema")
    with pytest.raises(ConnectorSpecError, match=fragment):
        load_spec(_write(tmp_path, raw))


@pytest.mark.parametrize(
    ("expr", "expected"),
    [
        ("bucket(16, id)", "bucket(16, id)"),
        ("day(created_at)", "day(created_at)"),
        ("identity(region)", "identity(region)"),
        ("truncate(4,sku)", "truncate(4, sku)"),
        ("region", "identity(region)"),
    ],
)
def test_parse_partition(expr: str, expected: str) -> None:
    assert str(parse_partition(expr)) == expected


@pytest.mark.parametrize("expr", ["bucket(0, id)", "bucket(id)", "days(x)", "day(1x)", "identity(a, b)", ""])
def test_parse_partition_rejects(expr: str) -> None:
    with pytest.raises(ValueError):
        parse_partition(expr)


def test_cdc_spec_dir_is_where_specs_are_read_by_name(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    doc = yaml.safe_load((SPEC_DIR / "postgres.yaml").read_text())
    doc.update(name="elsewhere", topic_prefix="elsewhere", errors_max_retries=3)
    (tmp_path / "elsewhere.yaml").write_text(yaml.safe_dump(doc))
    monkeypatch.setenv("CDC_SPEC_DIR", str(tmp_path))
    assert list(load_specs()) == ["elsewhere"]
    assert load_spec("elsewhere").errors_max_retries == 3
    monkeypatch.delenv("CDC_SPEC_DIR")
    assert "elsewhere" not in load_specs() and load_spec("postgres").errors_max_retries == 30
