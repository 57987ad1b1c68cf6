"""Snapshot filters: hostile ones are refused with their reason, good ones are regenerated in the source's dialect."""

from __future__ import annotations

import pytest

from cdclake.connectors import ConnectorKind
from cdclake.exceptions import SignalValidationError
from cdclake.signals.filters import ANSI, FILTER_DIALECTS, check_filter, filter_dialect

PG = ("postgres", "inventory.orders")
MY = ("mysql", "demo.orders")
IFX = (ANSI, "demo.informix.orders")
COLUMNS = ["id", "status", "Name", "created_at", "amount", "user"]


def _refused(where: tuple[str, str], kind: str, text: str, columns: list[str] | None = None) -> str:
    dialect, collection = where
    with pytest.raises(SignalValidationError) as info:
        check_filter(text, collection, kind, dialect, columns)
    message = str(info.value)
    assert message.startswith(f"filter of {collection}: "), message
    return message


@pytest.mark.parametrize(
    ("where", "text", "reason"),
    [
        # other tables, through subqueries
        (
            MY,
            "id IN (SELECT user FROM mysql.global_priv)",
            "subqueries are not allowed ((SELECT `user` FROM `mysql`.`global_priv`))",
        ),
        (MY, "id IN (SELECT User FROM mysql.user WHERE 1=1)", "subqueries are not allowed"),
        (
            PG,
            "id IN (SELECT usesysid FROM pg_shadow)",
            'subqueries are not allowed ((SELECT "usesysid" FROM "pg_shadow"))',
        ),
        (PG, "EXISTS (SELECT 1 FROM pg_authid WHERE rolsuper)", "subqueries are not allowed"),
        (PG, "status = (SELECT passwd FROM pg_shadow LIMIT 1)", "subqueries are not allowed"),
        (PG, "1=1 UNION SELECT * FROM pg_shadow", "set operations (UNION, INTERSECT, EXCEPT) are not allowed"),
        (
            MY,
            "1=1 UNION ALL SELECT * FROM mysql.global_priv",
            "set operations (UNION, INTERSECT, EXCEPT) are not allowed",
        ),
        (PG, "SELECT * FROM pg_shadow", "an incremental snapshot filter is a WHERE condition"),
        # stacked statements and comments
        (PG, "status = 'x'; DROP TABLE inventory.orders", "only one statement is allowed (no ';')"),
        (MY, "status = 'x'; DROP TABLE demo.orders; --", "comments are not allowed"),
        (PG, "status = 'x';", "only one statement is allowed (no ';')"),
        (PG, "status = 'x' -- AND id < 10", "comments are not allowed"),
        (PG, "status = /* hidden */ 'x'", "comments are not allowed"),
        (MY, "status = 'x' /*!50000 OR 1=1 */", "comments are not allowed"),
        (MY, "status = 'x' # and more", "comments are not allowed"),
        (PG, "status = 'x' /* unterminated", "cannot be read as PostgreSQL SQL"),
        # functions off the allowlist
        (PG, "pg_read_file('/etc/passwd') IS NOT NULL", "function PG_READ_FILE is not allowed"),
        (PG, "pg_sleep(10) IS NULL", "function PG_SLEEP is not allowed"),
        (PG, "status = current_user", "function CURRENT_USER is not allowed"),
        (PG, "status = version()", "function CURRENT_VERSION is not allowed"),
        (MY, "load_file('/etc/passwd') IS NULL", "function LOAD_FILE is not allowed"),
        (MY, "sleep(5) = 0", "function SLEEP is not allowed"),
        (MY, "benchmark(10000000, md5('x')) = 0", "function BENCHMARK is not allowed"),
        (MY, "status = database()", "is not allowed"),
        # placeholders and variables
        (MY, "id = @x", "placeholders and variables are not allowed (@x)"),
        (MY, "status = @@version", "placeholders and variables are not allowed"),
        (MY, "id = ?", "placeholders and variables are not allowed (?)"),
        (PG, "id = $1", "placeholders and variables are not allowed ($1)"),
        # columns of other tables, system columns, odd literals and casts
        (PG, "pg_shadow.passwd IS NOT NULL", 'column "pg_shadow"."passwd" refers to another table'),
        (PG, "inventory.customers.id = 1", "refers to another table"),
        (MY, "mysql.user.authentication_string = 'x'", "refers to another table"),
        (PG, "ctid = '(0,1)'", "system column ctid is not allowed"),
        (PG, "xmin::text = '1'", "system column xmin is not allowed"),
        (PG, "id::regclass IS NOT NULL", "REGCLASS is not allowed"),
        (PG, "status = E'\\x27'", "is not allowed in a filter"),
        (PG, "id = ANY(ARRAY[1, 2])", "not allowed"),
        # with standard_conforming_strings off, PostgreSQL would read \' as a quote inside the string
        (PG, "status = 'a\\' OR id = ''", "backslashes are not allowed in PostgreSQL strings"),
        (PG, "status LIKE 'a\\_%'", "backslashes are not allowed in PostgreSQL strings"),
        (IFX, "status = 'a\\'", "backslashes are not allowed in ANSI strings"),
        (PG, "id", "a filter must be a condition"),
        (PG, "", "it is empty"),
        (PG, "status = = 'x'", "cannot be parsed as PostgreSQL SQL at line 1"),
        (IFX, "\"status\" = 'open'", 'quoted identifier "status" is not allowed: Informix reads "..." as a string'),
    ],
)
def test_hostile_incremental_filters_are_refused(where: tuple[str, str], text: str, reason: str) -> None:
    assert reason in _refused(where, "incremental", text)


@pytest.mark.parametrize(
    ("where", "text", "reason"),
    [
        (PG, "SELECT * FROM inventory.customers", 'must select FROM inventory.orders, not "inventory"."customers"'),
        (PG, "SELECT * FROM pg_shadow", "must select FROM inventory.orders"),
        (PG, "SELECT * FROM orders", 'must select FROM inventory.orders, not "orders"'),
        (MY, "SELECT * FROM mysql.global_priv", "must select FROM demo.orders"),
        (MY, "SELECT * FROM demo.Orders", "must select FROM demo.orders"),
        (PG, "SELECT * FROM inventory.orders JOIN pg_shadow ON true", "a JOIN is not allowed"),
        (PG, "SELECT * FROM inventory.orders, pg_shadow", "a JOIN is not allowed"),
        (MY, "SELECT * FROM demo.orders o LEFT JOIN mysql.user u ON 1=1", "a JOIN is not allowed"),
        (PG, "SELECT * FROM (SELECT * FROM pg_shadow) AS t", "subqueries are not allowed"),
        (PG, "SELECT *, (SELECT passwd FROM pg_shadow) FROM inventory.orders", "subqueries are not allowed"),
        (PG, "SELECT * FROM inventory.orders WHERE id IN (SELECT 1 FROM pg_shadow)", "subqueries are not allowed"),
        (PG, "WITH s AS (SELECT * FROM pg_shadow) SELECT * FROM inventory.orders", "WITH is not allowed"),
        (PG, "SELECT * FROM inventory.orders UNION SELECT * FROM pg_shadow", "set operations"),
        (PG, "SELECT * FROM inventory.orders; DROP TABLE inventory.orders", "only one statement is allowed"),
        (PG, "SELECT * FROM inventory.orders -- WHERE id > 1", "comments are not allowed"),
        (PG, "SELECT * FROM inventory.orders ORDER BY id", "ORDER BY is not allowed"),
        (PG, "SELECT * FROM inventory.orders LIMIT 10", "LIMIT is not allowed"),
        (PG, "SELECT DISTINCT * FROM inventory.orders", "DISTINCT is not allowed"),
        (PG, "SELECT status FROM inventory.orders GROUP BY status", "GROUP BY is not allowed"),
        (PG, "SELECT * FROM inventory.orders FOR UPDATE", "a locking clause"),
        (PG, "SELECT * FROM inventory.orders o", "a table alias is not allowed"),
        (MY, "SELECT * FROM demo.orders FORCE INDEX (PRIMARY)", "an index hint is not allowed"),
        (PG, "SELECT id AS x FROM inventory.orders", 'plain columns of inventory.orders, not "id" AS "x"'),
        (PG, "SELECT id, pg_read_file('/etc/passwd') FROM inventory.orders", "plain columns of inventory.orders"),
        (PG, "SELECT pg_shadow.* FROM inventory.orders", '"pg_shadow".* is not allowed (select * or plain columns)'),
        (PG, "SELECT * FROM inventory.orders WHERE sleep(1) IS NULL", "function SLEEP is not allowed"),
        (PG, "id > 10", "a blocking snapshot filter must be a full SELECT statement"),
        (MY, "SELECT * FROM demo.orders INTO OUTFILE '/tmp/x'", "cannot be parsed as MySQL SQL"),
    ],
)
def test_hostile_blocking_filters_are_refused(where: tuple[str, str], text: str, reason: str) -> None:
    assert reason in _refused(where, "blocking", text)


@pytest.mark.parametrize(
    ("where", "kind", "text", "reason"),
    [
        (PG, "incremental", "secret = 'x'", "secret is not a column of inventory.orders (its columns: id, status,"),
        (PG, "incremental", "name = 'x'", "name is not a column"),  # unquoted folds to name; the column is "Name"
        (MY, "incremental", "password IS NOT NULL", "password is not a column of demo.orders"),
        (PG, "blocking", "SELECT id, secret FROM inventory.orders", "secret is not a column"),
        (PG, "blocking", "SELECT * FROM inventory.orders WHERE secret > 1", "secret is not a column"),
    ],
)
def test_columns_must_be_the_tables(where: tuple[str, str], kind: str, text: str, reason: str) -> None:
    assert reason in _refused(where, kind, text, COLUMNS)


@pytest.mark.parametrize(
    ("where", "text", "normalised"),
    [
        (PG, "status = 'open'", "\"status\" = 'open'"),
        (PG, "Status = 'open' or amount > 10", '("status" = \'open\' OR "amount" > 10)'),
        (
            PG,
            "(status = 'a' OR amount > 1) AND \"Name\" LIKE 'A%'",
            '("status" = \'a\' OR "amount" > 1) AND "Name" LIKE \'A%\'',
        ),
        (
            PG,
            "created_at >= current_date - interval '7 days' AND id BETWEEN 1 AND 100",
            '"created_at" >= CURRENT_DATE - INTERVAL \'7 DAYS\' AND "id" BETWEEN 1 AND 100',
        ),
        (
            PG,
            "status NOT IN ('a', 'b') AND user IS NOT NULL AND NOT (id = 3)",
            'NOT "status" IN (\'a\', \'b\') AND "user" IS NOT NULL AND NOT ("id" = 3)',
        ),
        (
            PG,
            "lower(\"Name\") = 'x' AND coalesce(amount, 0)::numeric(10,2) > 1.5 AND created_at < now()",
            'LOWER("Name") = \'x\' AND CAST(COALESCE("amount", 0) AS DECIMAL(10, 2)) > 1.5 '
            'AND "created_at" < CURRENT_TIMESTAMP',
        ),
        (PG, "date '2024-01-01' <= created_at", "CAST('2024-01-01' AS DATE) <= \"created_at\""),
        (PG, "status ILIKE 'a!%%' ESCAPE '!'", "\"status\" ILIKE 'a!%%' ESCAPE '!'"),
        (PG, "orders.id = 1 AND inventory.orders.id < 5", '"orders"."id" = 1 AND "inventory"."orders"."id" < 5'),
        (PG, "status = 'it''s'", "\"status\" = 'it''s'"),
        (
            MY,
            "`status` = 'open' AND created_at > NOW() - INTERVAL 7 DAY",
            "`status` = 'open' AND `created_at` > NOW() - INTERVAL '7' DAY",
        ),
        (MY, 'status = "open" OR amount DIV 2 = 1', "(`status` = 'open' OR `amount` DIV 2 = 1)"),
        (MY, "name = 'a\\' OR 1=1 -- '", "`name` = 'a'' OR 1=1 -- '"),  # one string literal
        (MY, "name LIKE 'a\\_%' AND status = 'a\\\\b'", "`name` LIKE 'a\\\\_%' AND `status` = 'a\\\\b'"),
        (
            MY,
            "cast(amount as signed) > 3 and upper(trim(status)) <=> 'OPEN'",
            "CAST(`amount` AS SIGNED) > 3 AND UPPER(TRIM(`status`)) <=> 'OPEN'",
        ),
        (IFX, "status = 'open' AND id > 10", "status = 'open' AND id > 10"),
    ],
)
def test_good_incremental_filters_are_regenerated(where: tuple[str, str], text: str, normalised: str) -> None:
    dialect, collection = where
    assert check_filter(text, collection, "incremental", dialect, COLUMNS) == normalised
    assert check_filter(normalised, collection, "incremental", dialect, COLUMNS) == normalised


@pytest.mark.parametrize(
    ("where", "text", "normalised"),
    [
        (PG, "SELECT * FROM inventory.orders WHERE id > 10", 'SELECT * FROM "inventory"."orders" WHERE "id" > 10'),
        (
            PG,
            "select id, status from Inventory.Orders where status = 'open' or id < 3",
            'SELECT "id", "status" FROM "inventory"."orders" WHERE "status" = \'open\' OR "id" < 3',
        ),
        (PG, "SELECT * FROM inventory.orders", 'SELECT * FROM "inventory"."orders"'),
        (MY, "SELECT * FROM `demo`.`orders` WHERE id > 10", "SELECT * FROM `demo`.`orders` WHERE `id` > 10"),
        (MY, "select ID from demo.orders where Status = 'x'", "SELECT `ID` FROM `demo`.`orders` WHERE `Status` = 'x'"),
        (IFX, "SELECT * FROM informix.orders WHERE id > 10", "SELECT * FROM informix.orders WHERE id > 10"),
        (IFX, "SELECT * FROM demo.informix.orders", "SELECT * FROM demo.informix.orders"),
    ],
)
def test_good_blocking_filters_are_regenerated(where: tuple[str, str], text: str, normalised: str) -> None:
    dialect, collection = where
    assert check_filter(text, collection, "blocking", dialect, COLUMNS) == normalised
    assert check_filter(normalised, collection, "blocking", dialect, COLUMNS) == normalised


def test_without_columns_names_are_not_checked() -> None:
    assert check_filter("secret = 1", "inventory.orders", "incremental", "postgres") == '"secret" = 1'
    # a bare name can only mean a column once quoted (PostgreSQL reads a bare `user` as the current user)
    assert check_filter("user = 'x'", "inventory.orders", "incremental", "postgres") == "\"user\" = 'x'"


def test_dialects() -> None:
    assert filter_dialect(ConnectorKind.POSTGRESQL) == "postgres"
    assert filter_dialect(ConnectorKind.MYSQL) == filter_dialect(ConnectorKind.MARIADB) == "mysql"
    assert filter_dialect(ConnectorKind.INFORMIX) == ANSI  # sqlglot has no Informix dialect
    assert filter_dialect(ConnectorKind.MONGODB) is None  # MongoDB filters are not SQL
    assert set(FILTER_DIALECTS) == set(ConnectorKind) - {ConnectorKind.MONGODB}
    with pytest.raises(ValueError, match="snapshot type"):
        check_filter("id = 1", "inventory.orders", "full", "postgres")
    with pytest.raises(ValueError, match="no filter dialect"):
        check_filter("id = 1", "inventory.orders", "incremental", "oracle")
