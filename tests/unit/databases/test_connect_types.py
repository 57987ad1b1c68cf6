"""The Connect field schemas Debezium sends for catalog columns, on hand-built columns (no database)."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from cdclake.connectors import DatabaseEndpoint, connect_config, load_spec
from cdclake.databases import SourceColumn, SourceTable
from cdclake.databases.catalog import informix_column
from cdclake.databases.connect_types import UNBOUNDED_BITS, TypeModes, connect_field, connect_fields
from cdclake.debezium import fields as f
from cdclake.exceptions import ConfigError, ConnectSchemaError

PG = TypeModes.defaults("postgresql")
MY = TypeModes.defaults("mysql")
IFX = TypeModes.defaults("informix")
TABLE = "inventory.things"


def pg(data_type: str, native_type: str | None = None, **kw: Any) -> SourceColumn:
    """A nullable PostgreSQL column called ``c`` as the catalog query reads it."""
    return SourceColumn("c", 1, data_type, native_type or data_type, kw.pop("nullable", True), **kw)


def my(data_type: str, native_type: str | None = None, **kw: Any) -> SourceColumn:
    return SourceColumn("c", 1, data_type, native_type or data_type, kw.pop("nullable", True), **kw)


def pg_schema(column: SourceColumn, modes: TypeModes = PG) -> dict[str, Any]:
    out = connect_field(column, "postgresql", modes, table=TABLE)
    assert out.pop(f.SCHEMA_FIELD) == column.name
    assert out.pop(f.SCHEMA_OPTIONAL) is column.nullable
    return out


def my_schema(column: SourceColumn, modes: TypeModes = MY, table: str = "demo.things") -> dict[str, Any]:
    out = connect_field(column, "mariadb", modes, table=table)
    del out[f.SCHEMA_FIELD], out[f.SCHEMA_OPTIONAL]
    return out


def ifx_schema(column: SourceColumn, modes: TypeModes = IFX) -> dict[str, Any]:
    out = connect_field(column, "informix", modes, table="stores.things")
    del out[f.SCHEMA_FIELD], out[f.SCHEMA_OPTIONAL]
    return out


def logical(type_: str, name: str, **parameters: str) -> dict[str, Any]:
    out: dict[str, Any] = {"type": type_, "name": name, "version": 1}
    if parameters:
        out["parameters"] = parameters
    return out


def decimal(scale: int, precision: int | None = None) -> dict[str, Any]:
    params = {"scale": str(scale)}
    if precision is not None:
        params["connect.decimal.precision"] = str(precision)
    return logical("bytes", f.CONNECT_DECIMAL, **params)


VSD = {
    **logical("struct", f.DBZ_VARIABLE_SCALE_DECIMAL),
    "fields": [
        {"field": "scale", "type": "int32", "optional": False},
        {"field": "value", "type": "bytes", "optional": False},
    ],
}
POINT = {
    **logical("struct", f.DBZ_POINT),
    "fields": [
        {"field": "x", "type": "double", "optional": False},
        {"field": "y", "type": "double", "optional": False},
        {"field": "wkb", "type": "bytes", "optional": True},
        {"field": "srid", "type": "int32", "optional": True},
    ],
}


def geometry(name: str = f.DBZ_GEOMETRY) -> dict[str, Any]:
    return {
        **logical("struct", name),
        "fields": [
            {"field": "wkb", "type": "bytes", "optional": False},
            {"field": "srid", "type": "int32", "optional": True},
        ],
    }


# --- TypeModes ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("dialect", "time_precision"),
    [
        ("postgresql", "adaptive"),
        ("postgres", "adaptive"),
        ("mysql", "adaptive_time_microseconds"),
        ("mariadb", "adaptive_time_microseconds"),
        ("informix", "adaptive"),
    ],
)
def test_an_empty_config_gives_debeziums_defaults(dialect: str, time_precision: str) -> None:
    modes = TypeModes.from_connector_config({}, dialect)
    assert modes == TypeModes(time_precision=time_precision)
    assert modes == TypeModes.defaults(dialect)
    assert (modes.decimal_handling, modes.binary_handling, modes.bigint_unsigned) == ("precise", "bytes", "long")
    assert (modes.hstore_handling, modes.interval_handling, modes.include_unknown_datatypes) == (
        "json",
        "numeric",
        False,
    )
    assert (modes.money_fraction_digits, modes.tinyint1_boolean) == (2, False)


def test_the_project_specs_configs_give_their_modes() -> None:
    pg_config = connect_config(load_spec("postgres"), DatabaseEndpoint("localhost"))
    assert TypeModes.from_connector_config(pg_config, "postgresql") == TypeModes(
        time_precision="adaptive_time_microseconds"
    )
    maria_config = connect_config(load_spec("mariadb"), DatabaseEndpoint("localhost"))
    assert TypeModes.from_connector_config(maria_config, "mariadb") == TypeModes(
        time_precision="adaptive_time_microseconds", bigint_unsigned="precise"
    )


def test_every_mode_is_read_case_insensitively() -> None:
    config = {
        "decimal.handling.mode": "STRING",
        "time.precision.mode": " connect ",
        "binary.handling.mode": "base64-url-safe",
        "hstore.handling.mode": "map",
        "interval.handling.mode": "string",
        "include.unknown.datatypes": "True",
        "money.fraction.digits": "4",
        "bigint.unsigned.handling.mode": "precise",  # not a PostgreSQL property: ignored
    }
    assert TypeModes.from_connector_config(config, "postgresql") == TypeModes(
        decimal_handling="string",
        time_precision="connect",
        binary_handling="base64-url-safe",
        hstore_handling="map",
        interval_handling="string",
        include_unknown_datatypes=True,
        money_fraction_digits=4,
    )


def test_properties_of_other_connectors_are_ignored() -> None:
    config = {
        "hstore.handling.mode": "bogus",
        "include.unknown.datatypes": "maybe",
        "bigint.unsigned.handling.mode": "precise",
    }
    assert TypeModes.from_connector_config(config, "mysql").bigint_unsigned == "precise"
    assert TypeModes.from_connector_config(config, "informix") == IFX


@pytest.mark.parametrize(
    ("config", "dialect", "message"),
    [
        ({"decimal.handling.mode": "exact"}, "postgresql", "decimal.handling.mode='exact'.*precise, double, string"),
        (
            {"time.precision.mode": "adaptive"},
            "mariadb",
            "time.precision.mode='adaptive'.*mariadb.*adaptive_time_micro",
        ),
        (
            {"time.precision.mode": "isostring"},
            "informix",
            "time.precision.mode='isostring'.*accepts adaptive, connect",
        ),
        ({"binary.handling.mode": "base32"}, "mysql", "binary.handling.mode.*bytes, base64, base64-url-safe, hex"),
        ({"bigint.unsigned.handling.mode": "string"}, "mysql", "bigint.unsigned.handling.mode.*long, precise"),
        ({"hstore.handling.mode": "jsonb"}, "postgresql", "hstore.handling.mode.*json, map"),
        ({"interval.handling.mode": "iso"}, "postgresql", "interval.handling.mode.*numeric, string"),
        ({"include.unknown.datatypes": "yes"}, "postgresql", "include.unknown.datatypes.*true, false"),
        ({"money.fraction.digits": "two"}, "postgresql", "money.fraction.digits='two'.*integer"),
    ],
)
def test_an_invalid_value_names_the_property_and_what_it_accepts(
    config: dict[str, str], dialect: str, message: str
) -> None:
    with pytest.raises(ConfigError, match=message):
        TypeModes.from_connector_config(config, dialect)


def test_an_unmapped_dialect_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="no Connect type mapping for the 'mongodb' connector"):
        TypeModes.from_connector_config({}, "mongodb")
    with pytest.raises(ConfigError, match="'oracle'"):
        connect_field(pg("integer"), "oracle", PG, table=TABLE)


def test_the_tinyint_one_converter_is_read_and_other_converters_are_refused() -> None:
    config = {
        "converters": "boolean",
        "boolean.type": "io.debezium.connector.binlog.converters.TinyIntOneToBooleanConverter",
        "boolean.selector": "demo.things.c, demo\\.other\\..*",
    }
    modes = TypeModes.from_connector_config(config, "mariadb")
    assert modes.tinyint1_boolean and modes.tinyint1_boolean_selector == ("demo.things.c", "demo\\.other\\..*")
    with pytest.raises(ConfigError, match=r"converters: geo \(geo.type=com.example.GeoConverter\) is a custom"):
        TypeModes.from_connector_config({"converters": "geo", "geo.type": "com.example.GeoConverter"}, "mysql")
    with pytest.raises(ConfigError, match="length.checker=false"):
        TypeModes.from_connector_config({**config, "boolean.length.checker": "false"}, "mysql")


def test_modes_built_directly_are_checked() -> None:
    with pytest.raises(ConfigError, match="binary.handling.mode='raw'"):
        TypeModes(binary_handling="raw")
    with pytest.raises(ConfigError, match="time.precision.mode=adaptive is not accepted by the mysql connector"):
        connect_field(my("time", "time(3)", datetime_precision=3), "mysql", TypeModes(), table="demo.things")


# --- PostgreSQL -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("column", "schema"),
    [
        (pg("smallint", type_name="int2"), {"type": "int16"}),
        (pg("integer"), {"type": "int32"}),
        (pg("bigint"), {"type": "int64"}),
        (pg("oid", type_name="oid"), {"type": "int64"}),
        (pg("real"), {"type": "float"}),
        (pg("double precision"), {"type": "double"}),
        (pg("boolean"), {"type": "boolean"}),
        (pg("text"), {"type": "string"}),
        (pg("character varying", "character varying(40)"), {"type": "string"}),
        (pg("character", "character(5)"), {"type": "string"}),
        (pg("inet"), {"type": "string"}),
        (pg("cidr"), {"type": "string"}),
        (pg("macaddr8"), {"type": "string"}),
        (pg("int4range"), {"type": "string"}),
        (pg("USER-DEFINED", "citext", type_name="citext", type_kind="base"), {"type": "string"}),
        (pg("json"), logical("string", f.DBZ_JSON)),
        (pg("jsonb"), logical("string", f.DBZ_JSON)),
        (pg("uuid"), logical("string", f.DBZ_UUID)),
        (pg("xml"), logical("string", f.DBZ_XML)),
        (pg("USER-DEFINED", "ltree", type_name="ltree", type_kind="base"), logical("string", f.DBZ_LTREE)),
        (pg("bit", "bit(8)", character_length=8), logical("bytes", f.DBZ_BITS, length="8")),
        (pg("bit", "bit(1)", character_length=1), {"type": "boolean"}),
        (pg("bit varying", "bit varying(16)", character_length=16), logical("bytes", f.DBZ_BITS, length="16")),
        (pg("bit varying"), logical("bytes", f.DBZ_BITS, length=str(UNBOUNDED_BITS))),
        (pg("point"), POINT),
        (pg("polygon"), geometry()),
        (pg("USER-DEFINED", "geometry(Point,4326)", type_name="geometry", type_kind="base"), geometry()),
        (pg("USER-DEFINED", "geography", type_name="geography", type_kind="base"), geometry(f.DBZ_GEOGRAPHY)),
        (
            pg("time with time zone", "time(6) with time zone", datetime_precision=6),
            logical("string", f.DBZ_ZONED_TIME),
        ),
        (pg("timestamp with time zone", datetime_precision=6), logical("string", f.DBZ_ZONED_TIMESTAMP)),
    ],
)
def test_postgres_types(column: SourceColumn, schema: dict[str, Any]) -> None:
    assert pg_schema(column) == schema


def test_not_null_columns_are_required_and_toastable_types_have_no_schema_of_their_own() -> None:
    out = connect_field(pg("text", nullable=False), "postgresql", PG, table=TABLE)
    assert out == {"field": "c", "type": "string", "optional": False}


@pytest.mark.parametrize(
    ("mode", "constrained", "unconstrained", "money"),
    [
        ("precise", decimal(4, 12), VSD, decimal(2)),
        ("double", {"type": "double"}, {"type": "double"}, {"type": "double"}),
        ("string", {"type": "string"}, {"type": "string"}, {"type": "string"}),
    ],
)
def test_postgres_numeric_and_money_under_each_decimal_mode(
    mode: str, constrained: dict[str, Any], unconstrained: dict[str, Any], money: dict[str, Any]
) -> None:
    modes = replace(PG, decimal_handling=mode)
    assert pg_schema(pg("numeric", "numeric(12,4)", numeric_precision=12, numeric_scale=4), modes) == constrained
    assert pg_schema(pg("numeric"), modes) == unconstrained
    assert pg_schema(pg("money"), modes) == money


def test_money_takes_its_scale_from_money_fraction_digits() -> None:
    assert pg_schema(pg("money"), replace(PG, money_fraction_digits=3)) == decimal(3)


def test_a_domain_takes_its_base_types_schema() -> None:
    column = pg("numeric", "inventory.price", numeric_precision=10, numeric_scale=2, type_name="numeric")
    assert pg_schema(replace(column, type_kind="base", domain="inventory.price")) == decimal(2, 10)


def test_a_decimal_without_a_scale_under_precise_names_the_column_and_the_setting() -> None:
    column = pg("numeric", "numeric(10)", numeric_precision=10)
    message = (
        r"inventory.things.c \(native type numeric\(10\), postgresql\): .*no scale.*"
        r"set decimal.handling.mode=double or string, or give the column a scale"
    )
    with pytest.raises(ConnectSchemaError, match=message):
        pg_schema(column)
    assert pg_schema(column, replace(PG, decimal_handling="double")) == {"type": "double"}


def test_postgres_enums_carry_their_labels() -> None:
    column = pg("USER-DEFINED", "inventory.mood", type_name="mood", type_kind="enum", enum_values=("sad", "ok"))
    assert pg_schema(column) == logical("string", f.DBZ_ENUM, allowed="sad,ok")
    with pytest.raises(ConnectSchemaError, match="inventory.things.c .*no members of the enum"):
        pg_schema(replace(column, enum_values=()))


@pytest.mark.parametrize(
    ("mode", "schema"),
    [("bytes", {"type": "bytes"}), *((m, {"type": "string"}) for m in ("base64", "base64-url-safe", "hex"))],
)
def test_bytea_under_each_binary_mode(mode: str, schema: dict[str, Any]) -> None:
    assert pg_schema(pg("bytea"), replace(PG, binary_handling=mode)) == schema


T6 = {"datetime_precision": 6}
T3 = {"datetime_precision": 3}


@pytest.mark.parametrize(
    ("mode", "date", "time6", "time3", "ts6", "ts3"),
    [
        (
            "adaptive",
            logical("int32", f.DBZ_DATE),
            logical("int64", f.DBZ_MICRO_TIME),
            logical("int32", f.DBZ_TIME),
            logical("int64", f.DBZ_MICRO_TIMESTAMP),
            logical("int64", f.DBZ_TIMESTAMP),
        ),
        (
            "adaptive_time_microseconds",
            logical("int32", f.DBZ_DATE),
            logical("int64", f.DBZ_MICRO_TIME),
            logical("int64", f.DBZ_MICRO_TIME),
            logical("int64", f.DBZ_MICRO_TIMESTAMP),
            logical("int64", f.DBZ_TIMESTAMP),
        ),
        (
            "connect",
            logical("int32", f.CONNECT_DATE),
            logical("int32", f.CONNECT_TIME),
            logical("int32", f.CONNECT_TIME),
            logical("int64", f.CONNECT_TIMESTAMP),
            logical("int64", f.CONNECT_TIMESTAMP),
        ),
        (
            "isostring",
            logical("string", f.DBZ_ISO_DATE),
            logical("string", f.DBZ_ISO_TIME),
            logical("string", f.DBZ_ISO_TIME),
            logical("string", f.DBZ_ISO_TIMESTAMP),
            logical("string", f.DBZ_ISO_TIMESTAMP),
        ),
        (
            "nanoseconds",
            logical("int32", f.DBZ_DATE),
            logical("int64", f.DBZ_NANO_TIME),
            logical("int64", f.DBZ_NANO_TIME),
            logical("int64", f.DBZ_NANO_TIMESTAMP),
            logical("int64", f.DBZ_NANO_TIMESTAMP),
        ),
    ],
)
def test_postgres_temporal_types_under_each_time_mode(
    mode: str, date: Any, time6: Any, time3: Any, ts6: Any, ts3: Any
) -> None:
    modes = replace(PG, time_precision=mode)
    assert pg_schema(pg("date", datetime_precision=0), modes) == date
    assert pg_schema(pg("time without time zone", "time(6) without time zone", **T6), modes) == time6
    assert pg_schema(pg("time without time zone", "time(3) without time zone", **T3), modes) == time3
    assert pg_schema(pg("timestamp without time zone", "timestamp(6) without time zone", **T6), modes) == ts6
    assert pg_schema(pg("timestamp without time zone", "timestamp(3) without time zone", **T3), modes) == ts3
    # with a zone, the schema does not depend on the mode
    assert pg_schema(pg("timestamp with time zone", **T6), modes) == logical("string", f.DBZ_ZONED_TIMESTAMP)


def test_a_timestamp_without_a_known_precision_under_an_adaptive_mode_names_the_setting() -> None:
    with pytest.raises(ConnectSchemaError, match="no fractional-second precision.*set time.precision.mode=connect"):
        pg_schema(pg("timestamp without time zone"))


def test_postgres_interval_and_hstore_modes() -> None:
    assert pg_schema(pg("interval", **T6)) == logical("int64", f.DBZ_MICRO_DURATION)
    assert pg_schema(pg("interval", **T6), replace(PG, interval_handling="string")) == logical("string", f.DBZ_INTERVAL)
    hstore = pg("USER-DEFINED", "hstore", type_name="hstore", type_kind="base")
    assert pg_schema(hstore) == logical("string", f.DBZ_JSON)
    assert pg_schema(hstore, replace(PG, hstore_handling="map")) == {
        "type": "map",
        "keys": {"type": "string", "optional": False},
        "values": {"type": "string", "optional": True},
    }


def array(element: SourceColumn, native: str) -> SourceColumn:
    return pg(
        "ARRAY", native, type_name="_" + (element.type_name or element.data_type), type_kind="array", element=element
    )


def test_postgres_arrays_have_optional_elements() -> None:
    ints = array(pg("integer", type_name="int4", type_kind="base"), "integer[]")
    assert pg_schema(ints) == {"type": "array", "items": {"type": "int32", "optional": True}}
    texts = array(pg("text", type_name="text", type_kind="base"), "text[]")
    assert pg_schema(texts) == {"type": "array", "items": {"type": "string", "optional": True}}
    uuids = array(pg("uuid", type_name="uuid", type_kind="base"), "uuid[]")
    assert pg_schema(uuids) == {"type": "array", "items": {**logical("string", f.DBZ_UUID), "optional": True}}
    stamps = array(pg("timestamp without time zone", type_name="timestamp", type_kind="base"), "timestamp[]")
    assert pg_schema(stamps, replace(PG, time_precision="connect")) == {
        "type": "array",
        "items": {**logical("int64", f.CONNECT_TIMESTAMP), "optional": True},
    }
    numbers = array(pg("numeric", type_name="numeric", type_kind="base"), "numeric[]")
    assert pg_schema(numbers, replace(PG, decimal_handling="string")) == {
        "type": "array",
        "items": {"type": "string", "optional": True},
    }


def test_an_enum_array_has_required_enum_elements() -> None:
    moods = array(pg("mood", type_name="mood", type_kind="enum", enum_values=("sad", "ok")), "inventory.mood[]")
    assert pg_schema(moods) == {
        "type": "array",
        "items": {**logical("string", f.DBZ_ENUM, allowed="sad,ok"), "optional": False},
    }


@pytest.mark.parametrize(
    ("element", "modes", "message"),
    [
        (pg("numeric", type_name="numeric", type_kind="base"), PG, "set decimal.handling.mode=double or string"),
        (
            pg("timestamp without time zone", type_name="timestamp", type_kind="base"),
            replace(PG, time_precision="adaptive_time_microseconds"),
            "time.precision.mode=adaptive_time_microseconds.*set time.precision.mode=connect",
        ),
        (pg("money", type_name="money", type_kind="base"), PG, r"leaves money\[\] columns out.*column.exclude.list"),
        (pg("interval", type_name="interval", type_kind="base"), PG, r"leaves interval\[\] columns out"),
        (pg("bit", type_name="bit", type_kind="base"), PG, r"bit\[\] columns as a single Bits"),
        (pg("price", type_name="numeric", type_kind="domain"), PG, "set include.unknown.datatypes=true"),
    ],
)
def test_undecidable_arrays_name_the_column_and_the_setting(
    element: SourceColumn, modes: TypeModes, message: str
) -> None:
    with pytest.raises(ConnectSchemaError, match=r"inventory.things.c \(native type x\[\], postgresql\): .*" + message):
        pg_schema(array(element, "x[]"), modes)


def test_unknown_types_need_include_unknown_datatypes() -> None:
    composite = pg("USER-DEFINED", "inventory.address", type_name="address", type_kind="composite")
    message = (
        r"inventory.things.c \(native type inventory.address, postgresql\): .*include.unknown.datatypes=false.*"
        r"set include.unknown.datatypes=true"
    )
    with pytest.raises(ConnectSchemaError, match=message):
        pg_schema(composite)
    unknown = replace(PG, include_unknown_datatypes=True)
    assert pg_schema(composite, unknown) == {"type": "bytes"}
    assert pg_schema(composite, replace(unknown, binary_handling="hex")) == {"type": "string"}
    pg_lsn = pg("pg_lsn", type_name="pg_lsn", type_kind="base")
    assert pg_schema(pg_lsn, unknown) == {"type": "bytes"}
    domains = array(pg("price", type_name="price", type_kind="domain"), "inventory.price[]")
    assert pg_schema(domains, unknown) == {"type": "array", "items": {"type": "bytes", "optional": False}}


def test_types_debezium_sends_in_shapes_cdclake_does_not_model_are_refused() -> None:
    with pytest.raises(ConnectSchemaError, match="Debezium sends circle as io.debezium.data.geometry.Circle"):
        pg_schema(pg("circle"))


def test_a_user_defined_type_without_its_catalog_details_is_refused() -> None:
    with pytest.raises(ConnectSchemaError, match="says USER-DEFINED without the type behind it"):
        pg_schema(pg("USER-DEFINED", "inventory.mood"))
    with pytest.raises(ConnectSchemaError, match="no element type of the array"):
        pg_schema(pg("ARRAY", "integer[]"))


# --- MySQL / MariaDB ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("column", "schema"),
    [
        (my("tinyint", "tinyint(4)"), {"type": "int16"}),
        (my("tinyint", "tinyint(3) unsigned", unsigned=True), {"type": "int16"}),
        (my("tinyint", "tinyint(1)"), {"type": "int16"}),
        (my("smallint", "smallint(6)"), {"type": "int16"}),
        (my("smallint", "smallint(5) unsigned", unsigned=True), {"type": "int32"}),
        (my("mediumint", "mediumint(8) unsigned", unsigned=True), {"type": "int32"}),
        (my("int", "int(11)"), {"type": "int32"}),
        (my("int", "int(10) unsigned", unsigned=True), {"type": "int64"}),
        (my("bigint", "bigint(20)"), {"type": "int64"}),
        (my("bigint", "bigint(20) unsigned", unsigned=True), {"type": "int64"}),
        (my("float"), {"type": "float"}),
        (my("float", "float(7,3)", numeric_precision=7, numeric_scale=3), {"type": "double"}),
        (my("double"), {"type": "double"}),
        (my("decimal", "decimal(12,4)", numeric_precision=12, numeric_scale=4), decimal(4, 12)),
        (my("bit", "bit(1)", numeric_precision=1), {"type": "boolean"}),
        (my("bit", "bit(12)", numeric_precision=12), logical("bytes", f.DBZ_BITS, length="12")),
        (my("varchar", "varchar(40)"), {"type": "string"}),
        (my("longtext"), {"type": "string"}),
        (my("blob"), {"type": "bytes"}),
        (my("varbinary", "varbinary(16)"), {"type": "bytes"}),
        (my("json"), logical("string", f.DBZ_JSON)),
        (my("enum", "enum('sad','ok')", enum_values=("sad", "ok")), logical("string", f.DBZ_ENUM, allowed="sad,ok")),
        (my("set", "set('a','b')", enum_values=("a", "b")), logical("string", f.DBZ_ENUM_SET, allowed="a,b")),
        (my("year", "year(4)"), logical("int32", f.DBZ_YEAR)),
        (my("timestamp", "timestamp(6)", datetime_precision=6), logical("string", f.DBZ_ZONED_TIMESTAMP)),
        (my("point"), POINT),
        (my("multipolygon"), geometry()),
    ],
)
def test_mysql_types(column: SourceColumn, schema: dict[str, Any]) -> None:
    assert my_schema(column) == schema


def test_bigint_unsigned_under_precise_is_a_scale_0_decimal_whatever_the_decimal_mode() -> None:
    column = my("bigint", "bigint(20) unsigned", unsigned=True)
    for mode in ("precise", "double", "string"):
        assert my_schema(column, replace(MY, bigint_unsigned="precise", decimal_handling=mode)) == decimal(0, 20)
    assert my_schema(my("bigint", "bigint(20)"), replace(MY, bigint_unsigned="precise")) == {"type": "int64"}


def test_tinyint_one_is_boolean_with_the_converter_for_the_columns_its_selector_picks() -> None:
    column = my("tinyint", "tinyint(1)")
    converter = replace(MY, tinyint1_boolean=True)
    assert my_schema(column, converter) == {"type": "boolean"}
    assert my_schema(my("tinyint", "tinyint(4)"), converter) == {"type": "int16"}
    picked = replace(converter, tinyint1_boolean_selector=("demo\\.things\\.c",))
    assert my_schema(column, picked) == {"type": "boolean"}
    assert my_schema(column, picked, table="demo.other") == {"type": "int16"}


@pytest.mark.parametrize(
    ("mode", "schema"), [("precise", decimal(4, 12)), ("double", {"type": "double"}), ("string", {"type": "string"})]
)
def test_mysql_decimal_under_each_mode(mode: str, schema: dict[str, Any]) -> None:
    column = my("decimal", "decimal(12,4)", numeric_precision=12, numeric_scale=4)
    assert my_schema(column, replace(MY, decimal_handling=mode)) == schema


def test_a_mysql_decimal_without_a_scale_is_undecidable_under_precise() -> None:
    with pytest.raises(
        ConnectSchemaError, match=r"demo.things.c \(native type decimal, mariadb\).*give the column a scale"
    ):
        my_schema(my("decimal"))


@pytest.mark.parametrize("mode", ["bytes", "base64", "hex"])
def test_mysql_binary_under_each_binary_mode(mode: str) -> None:
    expected = {"type": "bytes" if mode == "bytes" else "string"}
    assert my_schema(my("binary", "binary(4)"), replace(MY, binary_handling=mode)) == expected


@pytest.mark.parametrize(
    ("mode", "date", "time", "datetime3", "datetime6"),
    [
        (
            "adaptive_time_microseconds",
            logical("int32", f.DBZ_DATE),
            logical("int64", f.DBZ_MICRO_TIME),
            logical("int64", f.DBZ_TIMESTAMP),
            logical("int64", f.DBZ_MICRO_TIMESTAMP),
        ),
        (
            "connect",
            logical("int32", f.CONNECT_DATE),
            logical("int32", f.CONNECT_TIME),
            logical("int64", f.CONNECT_TIMESTAMP),
            logical("int64", f.CONNECT_TIMESTAMP),
        ),
        (
            "microseconds",
            logical("int32", f.DBZ_DATE),
            logical("int64", f.DBZ_MICRO_TIME),
            logical("int64", f.DBZ_MICRO_TIMESTAMP),
            logical("int64", f.DBZ_MICRO_TIMESTAMP),
        ),
    ],
)
def test_mysql_temporal_types_under_each_time_mode(
    mode: str, date: Any, time: Any, datetime3: Any, datetime6: Any
) -> None:
    modes = replace(MY, time_precision=mode)
    assert my_schema(my("date"), modes) == date
    assert my_schema(my("time", "time(6)", datetime_precision=6), modes) == time
    assert my_schema(my("datetime", "datetime(3)", datetime_precision=3), modes) == datetime3
    assert my_schema(my("datetime", "datetime(6)", datetime_precision=6), modes) == datetime6
    assert my_schema(my("timestamp", "timestamp(6)", datetime_precision=6), modes) == logical(
        "string", f.DBZ_ZONED_TIMESTAMP
    )


def test_an_unknown_mysql_type_names_column_exclude_list() -> None:
    with pytest.raises(ConnectSchemaError, match=r"demo.things.c \(native type inet6, mariadb\).*column.exclude.list"):
        my_schema(my("inet6"))


# --- Informix -------------------------------------------------------------------------------------


def test_informix_syscolumns_rows_become_columns() -> None:
    column = informix_column("amount", 3, 5 + 256, 12 * 256 + 4)
    assert column == SourceColumn("amount", 3, "decimal", "DECIMAL(12,4)", False, 12, 4)
    stamp = informix_column("at", 4, 10, 25 * 256 + 0 * 16 + 15)
    assert (stamp.native_type, stamp.datetime_precision) == ("DATETIME YEAR TO FRACTION(5)", 5)
    assert informix_column("name", 5, 13, 2 * 256 + 40).character_length == 40
    assert informix_column("flag", 6, 41, 1, extended_id=5).data_type == "boolean"


@pytest.mark.parametrize(
    ("coltype", "collength", "extended_id", "schema"),
    [
        (1, 2, 0, {"type": "int16"}),
        (2, 4, 0, {"type": "int32"}),
        (6, 4, 0, {"type": "int32"}),
        (52, 8, 0, {"type": "int64"}),
        (3, 8, 0, {"type": "double"}),
        (4, 4, 0, {"type": "float"}),
        (45, 1, 0, {"type": "boolean"}),
        (41, 1, 5, {"type": "boolean"}),
        (0, 10, 0, {"type": "string"}),
        (13, 40, 0, {"type": "string"}),
        (40, 2048, 1, {"type": "string"}),
        (41, 72, 11, {"type": "string"}),
        (41, 72, 10, {"type": "bytes"}),
        (11, 56, 0, {"type": "bytes"}),
        (5, 12 * 256 + 4, 0, decimal(4, 12)),
        (5, 16 * 256 + 255, 0, VSD),
        (7, 4, 0, logical("int32", f.DBZ_DATE)),
        (10, 19 * 256 + 0 * 16 + 10, 0, logical("int64", f.DBZ_TIMESTAMP)),
        (10, 25 * 256 + 0 * 16 + 15, 0, logical("int64", f.DBZ_MICRO_TIMESTAMP)),
    ],
)
def test_informix_types(coltype: int, collength: int, extended_id: int, schema: dict[str, Any]) -> None:
    assert ifx_schema(informix_column("c", 1, coltype, collength, extended_id)) == schema


def test_informix_connect_mode_and_binary_mode() -> None:
    modes = replace(IFX, time_precision="connect", binary_handling="hex", decimal_handling="string")
    assert ifx_schema(informix_column("c", 1, 10, 25 * 256 + 15), modes) == logical("int64", f.CONNECT_TIMESTAMP)
    assert ifx_schema(informix_column("c", 1, 7, 4), modes) == logical("int32", f.CONNECT_DATE)
    assert ifx_schema(informix_column("c", 1, 41, 72, 10), modes) == {"type": "string"}
    assert ifx_schema(informix_column("c", 1, 5, 16 * 256 + 255), modes) == {"type": "string"}


@pytest.mark.parametrize(
    ("coltype", "collength", "native", "message"),
    [
        (10, 8 * 256 + 6 * 16 + 10, "DATETIME HOUR TO SECOND", "documents DATETIME YEAR TO SECOND"),
        (14, 8 * 256 + 4 * 16 + 10, "INTERVAL DAY TO SECOND", "does not support INTERVAL"),
        (8, 12 * 256 + 2, r"MONEY\(12,2\)", "does not document.*column.exclude.list"),
        (19, 10, "SET", "does not document"),
    ],
)
def test_undocumented_informix_types_are_refused(coltype: int, collength: int, native: str, message: str) -> None:
    with pytest.raises(ConnectSchemaError, match=rf"stores.things.c \(native type {native}, informix\): .*{message}"):
        ifx_schema(informix_column("c", 1, coltype, collength))


# --- tables ---------------------------------------------------------------------------------------


def test_connect_fields_keeps_column_order_and_names_the_table() -> None:
    table = SourceTable(
        "inventory",
        "things",
        (SourceColumn("id", 1, "integer", "integer", False), SourceColumn("note", 2, "text", "text", True)),
    )
    assert connect_fields(table, "postgresql", PG) == [
        {"field": "id", "type": "int32", "optional": False},
        {"field": "note", "type": "string", "optional": True},
    ]
    with pytest.raises(ConnectSchemaError, match="shows no columns of inventory.gone"):
        connect_fields(SourceTable("inventory", "gone"), "postgresql", PG)
    bad = SourceTable("inventory", "things", (SourceColumn("amount", 1, "numeric", "numeric(9)", True, 9),))
    with pytest.raises(ConnectSchemaError, match=r"inventory.things.amount \(native type numeric\(9\)"):
        connect_fields(bad, "postgresql", PG)
