"""Workloads on the demo databases: the shop the demo changes, and a small one the tests use.

:class:`ShopWorkload` changes the shop tables (customers, products, orders, order_items) of one database, step by
step, with what a real application does: inserts, updates, deletes, a primary-key change, multi-table
transactions, a column added, a truncate and a rolled-back transaction. Its rows have ids from
:data:`DEMO_ID_BASE` (order items: order ids from it); the first step removes the previous run's rows, so a
rerun starts clean. The last step writes a marker (customer :data:`DEMO_ID_BASE`): once the lake shows it, the
lake has every change before it.
"""

from __future__ import annotations

import datetime as dt
import random
from collections.abc import Callable
from dataclasses import dataclass, field
from decimal import Decimal

from cdclake.demo.database import AppSql

DEMO_ID_BASE = 900_000
"""The demo workload's rows have ids in [DEMO_ID_BASE, DEMO_ID_BASE + 200_000)."""
ID_SPAN = 200_000
PK_CHANGE_OFFSET = 100_000
UTC = dt.UTC

_PRODUCT_NAMES = (
    "Café crème ☕",
    "Ærøskøbing mug",
    "日本茶 セット",
    "Zürich Müsli",
    "Señorita apron",
    "Ελιές (olives)",
    "Кофемолка",
    "Crème brûlée torch 🔥",
    "Smørrebrød board",
    "Hōjicha tin",
)
_CATEGORIES = ("beverage", "kitchen", "grocery", "apparel")
_FIRST = ("Zoë", "José", "Åsa", "Łukasz", "Chloé", "Søren", "Miyu 美羽", "Ana", "Björn", "Noémie", "Ravi", "Olga")
_LAST = ("Müller", "García", "Ødegaard", "Nowak", "Dubois", "Yılmaz", "Tanaka 田中", "Silva", "Ng", "O'Brien")


@dataclass
class StepResult:
    """What one step did: its name, the transactions it committed and when the last one committed."""

    name: str
    transactions: int = 0
    committed_at: dt.datetime | None = None
    note: str = ""


@dataclass
class ShopWorkload:
    """The demo's changes on one database (see the module docstring).

    Args:
        sql: the database, as the application user.
        rows: customers and orders to create (products: a quarter of it, at least 8).
        token: this run's id, written by the marker step.
        seed: the random generator's seed (the same seed gives the same changes).
    """

    sql: AppSql
    rows: int
    token: str
    seed: int = 7
    rng: random.Random = field(init=False)

    def __post_init__(self) -> None:
        self.rng = random.Random(self.seed)
        ns = "inventory" if self.sql.postgres else "demo"
        self.customers, self.products = f"{ns}.customers", f"{ns}.products"
        self.orders, self.items = f"{ns}.orders", f"{ns}.order_items"
        self.base = DEMO_ID_BASE
        self.n_products = max(8, self.rows // 4)

    # -- the steps, in order ---------------------------------------------------------------------

    def steps(self) -> list[tuple[str, Callable[[], StepResult]]]:
        """The steps of the workload, to run in this order."""
        return [
            ("reset: the previous run's rows removed, the marker row in place", self.reset),
            ("products inserted (unicode names, JSON attributes, enums, decimals)", self.insert_products),
            ("customers inserted (some emails and tiers NULL)", self.insert_customers),
            ("orders with their items, one transaction per 5 orders", self.insert_orders),
            ("updates: prices, tiers, emails to NULL, orders paid", self.update_rows),
            ("a primary-key change (customer id, its orders in the same transaction)", self.change_primary_key),
            ("a column added (products.launch_note) and filled", self.add_column),
            ("a transaction rolled back (nothing of it may reach the lake)", self.rolled_back),
            ("deletes: an order with its items, customers without orders", self.delete_rows),
            ("a truncate of order_items, then the items of the open orders again", self.truncate_items),
            ("the marker: the last change of the run", self.marker),
        ]

    def _done(self, name: str, transactions: int, note: str = "") -> StepResult:
        return StepResult(name, transactions, dt.datetime.now(UTC), note)

    def reset(self) -> StepResult:
        lo, hi = self.base, self.base + ID_SPAN
        with self.sql.transaction():
            self.sql.execute(f"DELETE FROM {self.items} WHERE order_id >= %s AND order_id < %s", [lo, hi])
            for table in (self.orders, self.products, self.customers):
                self.sql.execute(f"DELETE FROM {table} WHERE id >= %s AND id < %s", [lo, hi])
            self.sql.execute(
                f"INSERT INTO {self.customers} (id, name, email, region, updated_at) VALUES (%s, %s, %s, %s, %s)",
                [self.base, "demo marker", None, None, _naive_now()],
            )
        return self._done("reset", 1)

    def insert_products(self) -> StepResult:
        rows = []
        for i in range(1, self.n_products + 1):
            name = f"{_PRODUCT_NAMES[i % len(_PRODUCT_NAMES)]} #{i}"
            attributes = {"origin": self.rng.choice(["FR", "JP", "DK", "BR"]), "tags": ["demo", f"t{i % 3}"],
                          "dims_cm": {"w": i % 7 + 1, "h": 2.5}} if i % 4 else None  # fmt: skip
            rows.append(
                [
                    self.base + i,
                    f"SKU-{i:05d}",
                    name,
                    _CATEGORIES[i % len(_CATEGORIES)],
                    Decimal(self.rng.randint(150, 99_999)) / 100,
                    None if i % 5 == 0 else Decimal(self.rng.randint(1, 250_000)) / 1000,
                    None if attributes is None else self.sql.json(attributes),
                    i % 6 != 0,
                    None if i % 3 else _naive_now(),
                ]
            )
        with self.sql.transaction():
            self.sql.executemany(
                f"INSERT INTO {self.products} (id, sku, name, category, price, weight_kg, attributes, active, "
                "updated_at) VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s)",
                rows,
            )
        return self._done("products", 1, f"{len(rows)} products")

    def insert_customers(self) -> StepResult:
        txs = 0
        ids = list(range(self.base + 1, self.base + 1 + self.rows))
        for chunk in (ids[: len(ids) // 2], ids[len(ids) // 2 :]):
            if not chunk:
                continue
            rows = [
                [
                    cid,
                    f"{self.rng.choice(_FIRST)} {self.rng.choice(_LAST)}",
                    None if cid % 7 == 0 else f"c{cid}@example.com",
                    self.rng.choice(["EU", "US", "JP", None]),
                    None if cid % 3 == 0 else self.rng.choice(["bronze", "silver", "gold"]),
                    None if cid % 2 else self.sql.json({"newsletter": bool(cid % 4), "lang": "fr-CH"}),
                    _naive_now(),
                ]
                for cid in chunk
            ]
            with self.sql.transaction():
                self.sql.executemany(
                    f"INSERT INTO {self.customers} (id, name, email, region, tier, preferences, updated_at) "
                    "VALUES (%s, %s, %s, %s, %s, %s, %s)",
                    rows,
                )
            txs += 1
        return self._done("customers", txs, f"{self.rows} customers")

    def _order_rows(self, order_id: int) -> list[list[object]]:
        return [
            [
                order_id,
                line,
                self.base + self.rng.randint(1, self.n_products),
                self.rng.randint(1, 5),
                Decimal(self.rng.randint(150, 20_000)) / 100,
                None if line % 2 else Decimal(self.rng.randint(0, 3000)) / 10_000,
            ]
            for line in range(1, self.rng.randint(1, 3) + 1)
        ]

    def insert_orders(self) -> StepResult:
        txs = 0
        order_ids = list(range(self.base + 1, self.base + 1 + self.rows))
        for start in range(0, len(order_ids), 5):
            with self.sql.transaction():  # one transaction across orders and order_items
                for oid in order_ids[start : start + 5]:
                    items = self._order_rows(oid)
                    amount = sum((Decimal(q) * p for _, _, _, q, p, _ in items), Decimal(0))  # type: ignore[misc]
                    self.sql.execute(
                        f"INSERT INTO {self.orders} (id, customer_id, amount, status, ordered_on, notes) "
                        "VALUES (%s, %s, %s, %s, %s, %s)",
                        [oid, oid, amount.quantize(Decimal("0.01")), "new", dt.date(2026, 11, 1 + oid % 28),
                         None if oid % 4 else "leave at the door — merci"],
                    )  # fmt: skip
                    self.sql.executemany(
                        f"INSERT INTO {self.items} (order_id, line_no, product_id, quantity, unit_price, discount) "
                        "VALUES (%s, %s, %s, %s, %s, %s)",
                        items,
                    )
            txs += 1
        return self._done("orders", txs, f"{len(order_ids)} orders")

    def update_rows(self) -> StepResult:
        with self.sql.transaction():
            for pid in range(self.base + 1, self.base + self.n_products + 1, 3):
                self.sql.execute(
                    f"UPDATE {self.products} SET price = price + %s, updated_at = %s WHERE id = %s",
                    [Decimal("1.25"), _naive_now(), pid],
                )
        with self.sql.transaction():
            self.sql.execute(
                f"UPDATE {self.customers} SET email = NULL, tier = %s WHERE id >= %s AND id < %s AND MOD(id, 5) = 0",
                ["gold", self.base + 1, self.base + 1 + self.rows],
            )
        with self.sql.transaction():
            self.sql.execute(
                f"UPDATE {self.orders} SET status = %s, placed_at = %s, shipped_at = %s "
                "WHERE id >= %s AND id < %s AND MOD(id, 2) = 0",
                ["paid", dt.datetime.now(UTC) if self.sql.postgres else _naive_now(), _naive_now(),
                 self.base + 1, self.base + 1 + self.rows],
            )  # fmt: skip
        return self._done("updates", 3)

    def change_primary_key(self) -> StepResult:
        old = self.base + 2
        new = old + PK_CHANGE_OFFSET
        with self.sql.transaction():
            moved = self.sql.execute(f"UPDATE {self.customers} SET id = %s WHERE id = %s", [new, old])
            self.sql.execute(f"UPDATE {self.orders} SET customer_id = %s WHERE customer_id = %s", [new, old])
        return self._done("primary key", 1, f"customer {old} -> {new}" if moved else "nothing to move")

    def add_column(self) -> StepResult:
        kind = "text" if self.sql.postgres else "VARCHAR(200)"
        self.sql.execute(f"ALTER TABLE {self.products} ADD COLUMN IF NOT EXISTS launch_note {kind}")
        with self.sql.transaction():
            self.sql.execute(
                f"UPDATE {self.products} SET launch_note = %s WHERE id >= %s AND id < %s AND MOD(id, 2) = 1",
                ["nouveauté ✓ — 新製品", self.base + 1, self.base + 1 + self.n_products],
            )
        return self._done("column", 1)

    def rolled_back(self) -> StepResult:
        try:
            with self.sql.transaction():
                self.sql.execute(
                    f"INSERT INTO {self.customers} (id, name, email, region) VALUES (%s, %s, %s, %s)",
                    [self.base + ID_SPAN - 1, "never committed", "ghost@example.com", "EU"],
                )
                self.sql.execute(f"UPDATE {self.products} SET price = 0 WHERE id = %s", [self.base + 1])
                raise _Rollback
        except _Rollback:
            pass
        return self._done("rollback", 0, "rolled back")

    def delete_rows(self) -> StepResult:
        oid = self.base + 3
        with self.sql.transaction():  # an order and its items, in one transaction
            self.sql.execute(f"DELETE FROM {self.items} WHERE order_id = %s", [oid])
            self.sql.execute(f"DELETE FROM {self.orders} WHERE id = %s", [oid])
        with self.sql.transaction():
            self.sql.execute(
                f"DELETE FROM {self.customers} WHERE id >= %s AND id < %s AND MOD(id, 11) = 0 "
                f"AND id NOT IN (SELECT customer_id FROM {self.orders})",
                [self.base + 1, self.base + 1 + self.rows],
            )
            self.sql.execute(f"DELETE FROM {self.customers} WHERE id = %s", [self.base + 3])
        return self._done("deletes", 2)

    def truncate_items(self) -> StepResult:
        self.sql.execute(f"TRUNCATE TABLE {self.items}")
        open_orders = [
            int(oid) for oid in range(self.base + 1, self.base + 1 + self.rows) if oid % 2 == 1 and oid != self.base + 3
        ]
        with self.sql.transaction():
            for oid in open_orders:
                self.sql.executemany(
                    f"INSERT INTO {self.items} (order_id, line_no, product_id, quantity, unit_price, discount) "
                    "VALUES (%s, %s, %s, %s, %s, %s)",
                    self._order_rows(oid),
                )
        return self._done("truncate", 2, f"items of {len(open_orders)} open orders again")

    def marker(self) -> StepResult:
        with self.sql.transaction():
            self.sql.execute(
                f"UPDATE {self.customers} SET name = %s, updated_at = %s WHERE id = %s",
                [self.marker_name, _naive_now(), self.base],
            )
        return self._done("marker", 1)

    @property
    def marker_name(self) -> str:
        """The marker customer's name once the run is over."""
        return f"demo marker {self.token}"


class _Rollback(Exception):
    pass


def _naive_now() -> dt.datetime:
    """Now, as a value of a column without time zone (UTC wall-clock time; the databases run in UTC)."""
    return dt.datetime.now(UTC).replace(tzinfo=None)


def run_workload(sql: AppSql, customers: str, orders: str, id_base: int) -> dict[str, int]:
    """A small mixed workload on ``customers`` / ``orders``; returns the Kafka records expected per table.

    Rows with ids in ``[id_base, id_base + 1000)`` are deleted first (so a rerun starts clean), then:
    a transaction inserting customers, one inserting orders, updates, deletes, and a multi-table
    transaction (new customer + order + update of another order). A delete yields two records
    (the delete event and its tombstone).
    """
    c, o = id_base, id_base
    events = {customers: 0, orders: 0}
    with sql.transaction():
        events[orders] += 2 * sql.execute(f"DELETE FROM {orders} WHERE id >= %s AND id < %s", [o, o + 1000])
        events[customers] += 2 * sql.execute(f"DELETE FROM {customers} WHERE id >= %s AND id < %s", [c, c + 1000])
    with sql.transaction():
        for i in range(1, 6):
            sql.execute(
                f"INSERT INTO {customers} (id, name, email, region) VALUES (%s, %s, %s, %s)",
                [c + i, f"demo customer {i}", f"c{i}@example.com", "EU" if i % 2 else "US"],
            )
            events[customers] += 1
    with sql.transaction():
        for i in range(1, 9):
            sql.execute(
                f"INSERT INTO {orders} (id, customer_id, amount, status, ordered_on) VALUES (%s, %s, %s, %s, %s)",
                [o + 100 + i, c + 1 + i % 5, Decimal(i * 1250) / 100, "new", dt.date(2024, 3, i)],
            )
            events[orders] += 1
    events[customers] += sql.execute(f"UPDATE {customers} SET email = %s WHERE id = %s", ["changed@example.com", c + 2])
    events[orders] += sql.execute(
        f"UPDATE {orders} SET status = %s, amount = %s WHERE id = %s", ["paid", Decimal("99.90"), o + 103]
    )
    events[orders] += 2 * sql.execute(f"DELETE FROM {orders} WHERE id = %s", [o + 108])
    events[customers] += 2 * sql.execute(f"DELETE FROM {customers} WHERE id = %s", [c + 5])
    with sql.transaction():  # one transaction across both tables
        sql.execute(
            f"INSERT INTO {customers} (id, name, email, region) VALUES (%s, %s, %s, %s)",
            [c + 6, "demo customer 6", None, None],
        )
        sql.execute(
            f"INSERT INTO {orders} (id, customer_id, amount, status, ordered_on) VALUES (%s, %s, %s, %s, %s)",
            [o + 109, c + 6, Decimal("0.05"), "new", dt.date(2024, 4, 1)],
        )
        sql.execute(f"UPDATE {orders} SET amount = amount + 1 WHERE id = %s", [o + 101])
        events[customers] += 1
        events[orders] += 2
    return events
