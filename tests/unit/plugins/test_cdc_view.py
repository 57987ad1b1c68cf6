"""The CDC view's pages and JSON, rendered by its FastAPI app from fixed data (no Airflow server, no lake).

Airflow's authentication is replaced by an always-allowed dependency here; the integration tests
(tests/integration/test_airflow_stack.py) check that the real one refuses anonymous requests.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from fastapi import Depends
from fastapi.testclient import TestClient

from cdclake.connect import ConnectorStatus
from cdclake.connectors import load_spec
from cdclake.monitor import Batch, PartitionLag
from cdclake_airflow.view import app as view_app
from cdclake_airflow.view import data
from cdclake_airflow.view.charts import Point, throughput_latency_svg
from cdclake_airflow.view.data import Part, SourceView

T0 = datetime(2026, 11, 24, 12, 0, tzinfo=UTC)
HOSTILE = "<script>alert('x')</script>"


def _batch(i: int, records: int = 40, dead: int = 0) -> Batch:
    return Batch(
        batch_id=f"20261124T12000{i}-abc",
        seq=i,
        committed_at=T0 + timedelta(minutes=i),
        planned_at=T0 + timedelta(minutes=i, seconds=-20),
        records=records,
        dead_lettered=dead,
        tables={"lake.pg.inventory.orders": {"applied": records - dead, "skipped": 0, "dead_lettered": dead}},
        table_counts=[],
        transactions={"complete": 3, "held": 0, "mismatched": 0, "expired": 0},
        phases={"plan": 1.0, "apply": 5.0},
        source_ts={"first": (T0 + timedelta(minutes=i, seconds=-50)).isoformat()},
        problems=[],
        redo=False,
        status="committed",
        summary={"dead_letters": {"pg.inventory.orders": {"invalid_json": dead}}} if dead else {},
    )


def _view(name: str, *, failed: bool = False, different: bool = False) -> SourceView:
    spec = load_spec(name)
    state = "FAILED" if failed else "RUNNING"
    status = ConnectorStatus.model_validate(
        {
            "name": spec.connect_name,
            "connector": {"state": state},
            "tasks": [{"id": 0, "state": state, "trace": "boom"}],
        }
    )
    return SourceView(
        spec=spec,
        connector=Part(status),
        lag=Part([PartitionLag(f"{spec.topic_prefix}.x.orders", 0, 120, 100)]),
        batches=Part([_batch(2, dead=1), _batch(1)]),
        held_transactions=Part([]),
        schema_changes=Part([]),
        quarantine=Part([]),
        dead_letters=Part([(f"{spec.topic_prefix}.x.orders", "bad_json", 1)]),
        reconciliation=Part(
            [
                {"source_table": t, "status": "different" if different and t.endswith("orders") else "equal",
                 "source_rows": 5, "lake_rows": 5, "missing": 0, "extra": 0, "different": 0,
                 "checked_at": T0, "sample_keys": None, "note": None}
                for t in spec.table_names
            ]
        ),
    )  # fmt: skip


@pytest.fixture
def client(monkeypatch: pytest.MonkeyPatch) -> TestClient:
    views = {"postgres": _view("postgres"), "mariadb": _view("mariadb", failed=True, different=True)}
    monkeypatch.setattr(view_app, "_authorized", lambda: Depends(lambda: None))  # every request allowed
    monkeypatch.setattr(
        view_app, "source_views", lambda names=None: [v for n, v in views.items() if names is None or n in names]
    )
    monkeypatch.setattr(view_app, "deployment_specs", lambda: [v.spec for v in views.values()])
    monkeypatch.setattr(data, "deployment_specs", lambda: [v.spec for v in views.values()])

    class _Monitor:
        def dead_letters(self, source: str, limit: int, batch_id: str | None = None) -> list[dict[str, Any]]:
            return [{"recorded_at": T0, "batch_id": "b", "topic": "pg.x.orders", "partition": 0, "offset": 7,
                     "reason": "bad_json", "key": None, "value": HOSTILE}]  # fmt: skip

    monkeypatch.setattr("cdclake.monitor.LakeMonitor", _Monitor)
    return TestClient(view_app.create_app(), root_path="/cdclake")


def test_overview_shows_every_source_with_its_health(client: TestClient) -> None:
    page = client.get("/")
    assert page.status_code == 200
    html = page.text
    assert 'data-source="postgres"' in html and 'data-source="mariadb"' in html
    assert 'href="/cdclake/sources/postgres"' in html
    # mariadb: its connector FAILED and a table differs; postgres is fine
    assert '<a href="/cdclake/sources/mariadb">mariadb</a> <span class="badge failed">failed</span></h2>' in html
    assert '<a href="/cdclake/sources/postgres">postgres</a> <span class="badge ok">ok</span></h2>' in html
    assert "20 record(s) behind" in html


def test_a_source_page_has_lag_batches_chart_and_verdicts(client: TestClient) -> None:
    html = client.get("/sources/postgres").text
    assert html.count("<tr data-batch=") == 2
    assert "<svg" in html and 'class="bar"' in html
    assert 'data-table="inventory.orders"' in html and '<span class="badge equal">equal</span>' in html
    assert 'href="/cdclake/sources/postgres/dead-letters?batch_id=20261124T120002-abc"' in html
    # the batch's dead letters per topic and reason, linked to its records
    assert (
        '<div class="dead-lettered">dead-lettered <code>pg.inventory.orders</code> <code>invalid_json</code>: '
        '<a href="/cdclake/sources/postgres/dead-letters?batch_id=20261124T120002-abc">1</a></div>'
    ) in html
    assert html.count('class="dead-lettered"') == 1
    assert client.get("/sources/nope").status_code == 404


def test_the_dag_tab_shows_the_ingest_dags_source(client: TestClient) -> None:
    assert "<h1>mariadb" in client.get("/dag/cdc_ingest__mariadb").text
    assert "<h1>mariadb" in client.get("/dag/cdc_follow__mariadb").text
    other = client.get("/dag/iceberg_maintenance").text
    assert "is not an ingest DAG" in other and 'data-source="postgres"' in other


def test_dead_letters_are_shown_escaped(client: TestClient) -> None:
    html = client.get("/sources/postgres/dead-letters").text
    assert HOSTILE not in html and "&lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt;" in html


def test_the_json_api(client: TestClient) -> None:
    sources = client.get("/api/sources").json()
    assert [s["source"] for s in sources] == ["postgres", "mariadb"]
    pg = client.get("/api/sources/postgres").json()
    assert (
        pg["health"] == "ok"
        and pg["lag"]["records"] == 20
        and pg["connector"]["tasks"] == [{"id": 0, "state": "RUNNING"}]
    )
    assert [b["batch_id"] for b in pg["batches"]] == ["20261124T120002-abc", "20261124T120001-abc"]
    assert pg["batches"][0]["latency_s"] == 50.0 and pg["batches"][0]["duration_s"] == 20.0
    assert [b["dead_letters"] for b in pg["batches"]] == [{"pg.inventory.orders": {"invalid_json": 1}}, {}]
    assert client.get("/api/sources/mariadb").json()["health"] == "failed"
    [letter] = client.get("/api/sources/postgres/dead-letters").json()
    assert letter["value"] == HOSTILE and letter["offset"] == 7


def test_the_icon_is_public(client: TestClient) -> None:
    icon = client.get("/static/icon.svg")
    assert icon.status_code == 200 and icon.headers["content-type"].startswith("image/svg+xml")


def test_the_chart_draws_a_bar_and_a_point_per_batch() -> None:
    svg = throughput_latency_svg([Point(T0, 100.0, 5.0), Point(T0 + timedelta(minutes=1), 50.0, None)], "t <x>")
    assert svg.count('class="bar"') == 2 and svg.count('class="dot"') == 1
    assert "t &lt;x&gt;" in svg and "<x>" not in svg
    assert "no batches yet" in throughput_latency_svg([], "empty")
