"""The dialect registry is keyed by ``source.connector``."""

from __future__ import annotations

import pytest

from cdclake.dialects import (
    InformixDialect,
    MariaDbDialect,
    MongoDbDialect,
    MySqlDialect,
    PostgresDialect,
    get_dialect,
    registered_connectors,
)
from cdclake.exceptions import UnsupportedDialectError


@pytest.mark.parametrize(
    ("connector", "cls"),
    [("postgresql", PostgresDialect), ("mysql", MySqlDialect), ("mariadb", MariaDbDialect),
     ("mongodb", MongoDbDialect), ("informix", InformixDialect), ("MySQL", MySqlDialect)],
)  # fmt: skip
def test_get_dialect(connector: str, cls: type) -> None:
    assert type(get_dialect(connector)) is cls


def test_registered_connectors() -> None:
    assert registered_connectors() == ("informix", "mariadb", "mongodb", "mysql", "postgresql")


@pytest.mark.parametrize("connector", ["oracle", "", None])
def test_unknown_connector_raises(connector: str | None) -> None:
    with pytest.raises(UnsupportedDialectError, match="no dialect for source.connector"):
        get_dialect(connector)


def test_dialect_traits() -> None:
    assert PostgresDialect.has_unavailable_placeholder and not MySqlDialect.has_unavailable_placeholder
    assert MongoDbDialect.document_store
    assert issubclass(MariaDbDialect, MySqlDialect)
    assert get_dialect("mysql").namespace("db", None) == "db"
    assert get_dialect("postgresql").namespace("db", "public") == "public"
