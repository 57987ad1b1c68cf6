"""The lake's pyiceberg catalogs time out and retry: the lock retry helper, the embedded catalog on a locked
SQLite file (in ``tmp_path``), and the REST catalog's sessions (no server: ``requests_mock`` answers)."""

from __future__ import annotations

import logging
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from unittest import mock

import pyarrow as pa
import pytest
import requests
import requests_mock
from requests.adapters import HTTPAdapter
from sqlalchemy.exc import OperationalError

from cdclake.exceptions import CdcError, ConfigError
from cdclake.lake import LakeConfig, clients
from cdclake.lake.clients import (
    LOCK_ATTEMPTS,
    REST_RETRIES,
    REST_TIMEOUT_S,
    CatalogLockedError,
    LakeRestCatalog,
    LakeSqlCatalog,
    open_catalog,
    rest_adapter,
    retry_on_lock,
    with_busy_timeout,
)

REST_URI = "http://127.0.0.1:9"
CUSTOMERS = ("pg", "inventory", "customers")


def _locked() -> OperationalError:
    return OperationalError("UPDATE iceberg_tables ...", {}, sqlite3.OperationalError("database is locked"))


class _Calls:
    """A catalog operation that fails with ``failures`` errors before it returns ``"done"``."""

    def __init__(self, *failures: BaseException) -> None:
        self.failures = list(failures)
        self.count = 0

    def __call__(self) -> str:
        self.count += 1
        if self.failures:
            raise self.failures.pop(0)
        return "done"


# ---- retry_on_lock ---------------------------------------------------------------------------------


def test_a_locked_operation_is_retried_with_backoff_then_succeeds(caplog: pytest.LogCaptureFixture) -> None:
    call, waits = _Calls(_locked(), _locked()), []
    with caplog.at_level(logging.WARNING, logger="cdclake.lake.clients"):
        result = retry_on_lock("commit_table cdc_audit.ledger", "lake", call, sleep=waits.append)
    assert (result, call.count, waits) == ("done", 3, [0.25, 0.5])
    assert [r.getMessage() for r in caplog.records] == [
        "commit_table cdc_audit.ledger on catalog lake: database is locked (attempt 1 of 5); retrying in 0.25 s",
        "commit_table cdc_audit.ledger on catalog lake: database is locked (attempt 2 of 5); retrying in 0.50 s",
    ]


def test_an_operation_still_locked_after_n_attempts_names_the_operation_and_the_catalog() -> None:
    call, waits = _Calls(*(_locked() for _ in range(10))), []
    with pytest.raises(CatalogLockedError) as raised:
        retry_on_lock("load_table pg.inventory.customers", "lake", call, attempts=3, sleep=waits.append)
    error = raised.value
    assert (call.count, waits) == (3, [0.25, 0.5])
    assert (error.operation, error.catalog, error.attempts) == ("load_table pg.inventory.customers", "lake", 3)
    assert str(error).startswith(
        "load_table pg.inventory.customers on catalog 'lake': the SQLite catalog was still locked after 3 attempts "
        "((sqlite3.OperationalError) database is locked)"
    )
    assert isinstance(error, CdcError) and isinstance(error.__cause__, OperationalError)


def test_the_backoff_doubles_up_to_its_cap() -> None:
    waits: list[float] = []
    with pytest.raises(CatalogLockedError):
        retry_on_lock(
            "op",
            "lake",
            _Calls(*(_locked() for _ in range(6))),
            attempts=6,
            backoff_s=1,
            max_backoff_s=4,
            sleep=waits.append,
        )
    assert waits == [1, 2, 4, 4, 4]


@pytest.mark.parametrize(
    "error",
    [
        OperationalError("SELECT 1", {}, sqlite3.OperationalError("no such table: iceberg_tables")),
        ValueError("database is locked"),  # the words, but not SQLite's error
    ],
    ids=["other-sqlite-error", "not-sqlite"],
)
def test_other_errors_are_raised_at_once(error: Exception) -> None:
    call, waits = _Calls(error), []
    with pytest.raises(type(error)):
        retry_on_lock("op", "lake", call, sleep=waits.append)
    assert (call.count, waits) == (1, [])


def test_sqlite3s_own_locked_error_is_retried_too() -> None:
    call = _Calls(sqlite3.OperationalError("database table is locked"))
    assert retry_on_lock("op", "lake", call, sleep=lambda _: None) == "done"


# ---- the embedded (SQLite) catalog -----------------------------------------------------------------


@pytest.mark.parametrize(
    ("uri", "expected"),
    [
        ("sqlite:////l/catalog.db", "sqlite:////l/catalog.db?timeout=15"),
        (
            "sqlite:////l/catalog.db?check_same_thread=false",
            "sqlite:////l/catalog.db?check_same_thread=false&timeout=15",
        ),
        ("sqlite:////l/catalog.db?timeout=2", "sqlite:////l/catalog.db?timeout=2"),  # its own is kept
        ("postgresql://h/db", "postgresql://h/db"),
    ],
)
def test_the_sqlite_uri_gets_the_busy_timeout(uri: str, expected: str) -> None:
    assert with_busy_timeout(uri) == expected


@pytest.fixture
def lake(tmp_path: Path) -> LakeConfig:
    config = LakeConfig.embedded(tmp_path)
    config.ensure_dirs()
    return config


def test_the_embedded_lake_opens_with_the_busy_timeout_and_works(lake: LakeConfig) -> None:
    catalog = lake.open_catalog()
    assert isinstance(catalog, LakeSqlCatalog)
    assert catalog.engine.url.query == {"timeout": "15"}
    assert catalog.engine.url.database == str(lake.catalog_db)
    catalog.create_namespace_if_not_exists(CUSTOMERS[:2])
    table = catalog.create_table_if_not_exists(CUSTOMERS, schema=pa.schema([("id", pa.int64())]))
    table.append(pa.table({"id": [1, 2]}))
    assert lake.open_catalog().load_table(CUSTOMERS).scan().to_arrow().num_rows == 2


def test_processes_opening_a_fresh_catalog_at_once_both_open_it(
    lake: LakeConfig, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The race, made deterministic: between this process's existence check and its CREATE TABLE, another
    process creates the catalog's tables, so SQLite answers ``table iceberg_tables already exists``."""
    from pyiceberg.catalog.sql import SqlCatalog, SqlCatalogBaseTable

    original = SqlCatalog.create_tables
    calls: list[str] = []

    def lose_the_race(self: SqlCatalog) -> None:
        calls.append("create")
        if len(calls) == 1:
            SqlCatalogBaseTable.metadata.create_all(self.engine)  # the other process wins
            SqlCatalogBaseTable.metadata.create_all(self.engine, checkfirst=False)  # this one's CREATE TABLE
        original(self)

    monkeypatch.setattr(SqlCatalog, "create_tables", lose_the_race)
    catalog = lake.open_catalog()
    assert calls == ["create", "create"]
    catalog.create_namespace_if_not_exists(CUSTOMERS[:2])
    assert catalog.list_namespaces() == [CUSTOMERS[:1]]


@pytest.fixture
def locked_catalog(lake: LakeConfig, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[LakeSqlCatalog, Any]]:
    """A catalog with a table, a 50 ms busy timeout, and another connection holding the file's write lock."""
    props = lake.pyiceberg_properties()
    props.pop("type")
    catalog = LakeSqlCatalog(props.pop("name"), **{**props, "uri": with_busy_timeout(props["uri"], 0.05)})
    catalog.create_namespace(CUSTOMERS[:2])
    catalog.create_table(CUSTOMERS, schema=pa.schema([("id", pa.int64())]))
    holder = sqlite3.connect(lake.catalog_db, isolation_level=None)
    holder.execute("BEGIN EXCLUSIVE")
    waits: list[float] = []
    monkeypatch.setattr(clients, "wait", waits.append)
    yield catalog, (holder, waits)
    holder.close()
    catalog.close()


def test_a_catalog_still_locked_after_the_attempts_fails_naming_the_table(
    locked_catalog: tuple[LakeSqlCatalog, Any],
) -> None:
    catalog, (_, waits) = locked_catalog
    with pytest.raises(CatalogLockedError, match=r"^load_table pg\.inventory\.customers on catalog 'lake'"):
        catalog.load_table(CUSTOMERS)
    assert len(waits) == LOCK_ATTEMPTS - 1


def test_an_operation_waits_out_a_lock_released_meanwhile(
    locked_catalog: tuple[LakeSqlCatalog, Any], monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    catalog, (holder, waits) = locked_catalog
    monkeypatch.setattr(clients, "wait", lambda seconds: (waits.append(seconds), holder.rollback()))
    with caplog.at_level(logging.WARNING, logger="cdclake.lake.clients"):
        catalog.load_table(CUSTOMERS).append(pa.table({"id": [1]}))
    assert waits == [0.25]
    assert [r.getMessage() for r in caplog.records] == [
        "load_table pg.inventory.customers on catalog lake: database is locked (attempt 1 of 5); retrying in 0.25 s"
    ]
    assert catalog.load_table(CUSTOMERS).scan().to_arrow().num_rows == 1


def test_another_kind_of_catalog_is_refused() -> None:
    with pytest.raises(ConfigError, match="'hive' is not one cdclake opens"):
        open_catalog({"name": "lake", "type": "hive", "uri": "thrift://h:9083"})


# ---- the REST catalog --------------------------------------------------------------------------------


def test_the_rest_adapter_times_out_and_retries_only_idempotent_requests() -> None:
    adapter = rest_adapter()
    retry = adapter.max_retries
    assert adapter.timeout == REST_TIMEOUT_S == (10.0, 60.0)  # type: ignore[attr-defined]
    assert (retry.total, retry.connect, retry.read, retry.status) == (REST_RETRIES,) * 4
    assert retry.status_forcelist == {429, 502, 503, 504}
    assert retry.allowed_methods == {"GET", "HEAD", "OPTIONS"}  # a POST (commit) is never sent twice
    assert retry.backoff_factor == 0.5 and retry.respect_retry_after_header and not retry.raise_on_status


def test_the_rest_adapter_gives_a_request_without_a_timeout_its_own() -> None:
    adapter = rest_adapter(timeout=(1.0, 2.0))
    request = requests.Request("GET", f"{REST_URI}/v1/config").prepare()
    with mock.patch.object(HTTPAdapter, "send", return_value="sent") as send:
        adapter.send(request)
        adapter.send(request, timeout=7)
    assert [call.kwargs["timeout"] for call in send.call_args_list] == [(1.0, 2.0), 7]


def test_the_rest_catalog_mounts_the_adapter_on_every_session_it_creates() -> None:
    # pyiceberg fetches /v1/config while the catalog is constructed; requests_mock answers it (it replaces
    # the transport, so the mounted adapters are inspected rather than exercised)
    with requests_mock.Mocker() as server:
        server.get(f"{REST_URI}/v1/config", json={"defaults": {}, "overrides": {}})
        catalog = LakeConfig(kind="rest", uri=REST_URI, warehouse="s3://lake/").open_catalog()
    assert isinstance(catalog, LakeRestCatalog)
    assert server.call_count == 1
    for prefix in ("http://", "https://"):
        adapter = catalog._session.adapters[prefix]
        assert adapter.timeout == REST_TIMEOUT_S  # type: ignore[attr-defined]
        assert adapter.max_retries.total == REST_RETRIES
    config_session = catalog._create_session()
    assert config_session.get_adapter(f"{REST_URI}/v1/config").timeout == REST_TIMEOUT_S  # type: ignore[attr-defined]
