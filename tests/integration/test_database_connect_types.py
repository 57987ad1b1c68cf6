"""The live catalog of ``all_types`` mapped to Connect schemas equals what Debezium sent with schemas on.

The expected schemas are the ``after`` field of the schemas-on captures (``tests/fixtures/captures``), recorded
from the local stack with the connectors of ``include/connectors/{postgres,mariadb}.yaml``; the modes come from
the same specs through :func:`cdclake.connectors.connect_config`. Only catalog queries run against the stack.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from cdclake.connectors import DatabaseEndpoint, connect_config, load_spec
from cdclake.databases import open_database, stack_connection
from cdclake.databases.connect_types import TypeModes, connect_fields
from cdclake.debezium import fields as f
from cdclake.stack import Stack

pytestmark = pytest.mark.integration("stack")

CAPTURES = Path(__file__).resolve().parents[1] / "fixtures" / "captures"
#: What the comparison leaves out: a schema's ``doc`` text (nothing decodes it).
IGNORED = frozenset({"doc"})


def _without_docs(schema: Any) -> Any:
    if isinstance(schema, dict):
        return {k: _without_docs(v) for k, v in schema.items() if k not in IGNORED}
    if isinstance(schema, list):
        return [_without_docs(v) for v in schema]
    return schema


def _captured_after(capture: str) -> list[dict[str, Any]]:
    """The ``after`` field schemas of the first data record of a schemas-on capture."""
    for line in (CAPTURES / capture).read_text(encoding="utf-8").splitlines():
        record = json.loads(line)
        value = json.loads(record["value"]) if record.get("value") else None
        schema = value.get(f.SCHEMA) if isinstance(value, dict) else None
        if not schema:
            continue
        for envelope_field in schema[f.SCHEMA_FIELDS]:
            if envelope_field[f.SCHEMA_FIELD] == f.AFTER:
                return _without_docs(envelope_field[f.SCHEMA_FIELDS])
    raise AssertionError(f"{capture} has no data record with a value schema")


def _mapped(stack: Stack, dialect: str, namespace: str, spec: str) -> tuple[list[dict[str, Any]], TypeModes]:
    modes = TypeModes.from_connector_config(connect_config(load_spec(spec), DatabaseEndpoint("localhost")), dialect)
    with open_database(stack_connection(dialect, "reader", "demo", stack=stack)) as db:
        return connect_fields(db.table(namespace, "all_types"), dialect, modes), modes


def _assert_same_fields(got: list[dict[str, Any]], expected: list[dict[str, Any]]) -> None:
    assert [g[f.SCHEMA_FIELD] for g in got] == [e[f.SCHEMA_FIELD] for e in expected]
    for mapped, captured in zip(got, expected, strict=True):
        assert mapped == captured, f"column {captured[f.SCHEMA_FIELD]}"


def test_postgres_all_types_maps_to_the_captured_schemas(stack: Stack) -> None:
    got, _ = _mapped(stack, "postgresql", "inventory", "postgres")
    _assert_same_fields(got, _captured_after("pg_all_types_schemas.jsonl"))


def test_mariadb_all_types_maps_to_the_captured_schemas(stack: Stack) -> None:
    got, modes = _mapped(stack, "mariadb", "demo", "mariadb")
    expected = _captured_after("mariadb_all_types_schemas.jsonl")
    # The capture was recorded before the MariaDB spec's connectors set bigint.unsigned.handling.mode=precise
    # (they ran with Debezium's default, long), so BIGINT UNSIGNED is INT64 there; the spec's mode today makes
    # it a scale-0 Decimal.
    assert modes.bigint_unsigned == "precise"
    by_name = {g[f.SCHEMA_FIELD]: g for g in got}
    assert by_name["c_bigint_u"] == {
        f.SCHEMA_FIELD: "c_bigint_u",
        f.SCHEMA_TYPE: "bytes",
        f.SCHEMA_NAME: f.CONNECT_DECIMAL,
        f.SCHEMA_VERSION: 1,
        f.SCHEMA_PARAMETERS: {f.DECIMAL_SCALE: "0", f.DECIMAL_PRECISION: "20"},
        f.SCHEMA_OPTIONAL: True,
    }
    with open_database(stack_connection("mariadb", "reader", "demo", stack=stack)) as db:
        at_capture = connect_fields(db.table("demo", "all_types"), "mariadb", replace(modes, bigint_unsigned="long"))
    _assert_same_fields(at_capture, expected)
