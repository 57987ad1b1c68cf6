"""The CDC view: a FastAPI app mounted by Airflow's API server at ``/cdclake`` (see :mod:`cdclake_airflow.plugin`).

Every route sits behind Airflow's own authentication (the UI's session token, or a bearer token from
``POST /auth/token``) and needs read access to DAGs; an anonymous request gets 401, an invalid token 403.

HTML pages (server-rendered, no JavaScript: they work in the UI's sandboxed frames):

* ``/cdclake/``: every source of the deployment at a glance;
* ``/cdclake/sources/<source>``: connector and tasks, Kafka lag per partition, the last batches (records,
  applied/skipped/dead-lettered per table, phases, duration), throughput and latency over time, transactions
  held, schema changes, quarantined tables, dead letters and the last reconciliation per table;
* ``/cdclake/sources/<source>/dead-letters``: the dead-lettered records themselves;
* ``/cdclake/dag/<dag_id>``: the tab of ``cdc_ingest__<source>`` and ``cdc_follow__<source>`` (that source's page).

JSON: ``/cdclake/api/sources``, ``/cdclake/api/sources/<source>``, ``/cdclake/api/sources/<source>/dead-letters``.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from fastapi import APIRouter, Depends, FastAPI, HTTPException, Query, Request
from fastapi.responses import HTMLResponse, JSONResponse, Response
from jinja2 import Environment, PackageLoader, select_autoescape
from markupsafe import Markup

from cdclake_airflow.view.charts import Point, throughput_latency_svg
from cdclake_airflow.view.data import SourceView, dag_source, deployment_specs, environment_label, source_views

ICON_SVG = (
    '<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 24 24" fill="none" stroke="currentColor" stroke-width="2">'
    '<ellipse cx="12" cy="5" rx="8" ry="3"/><path d="M4 5v6c0 1.7 3.6 3 8 3s8-1.3 8-3V5"/>'
    '<path d="M4 11v6c0 1.7 3.6 3 8 3"/><path d="M16 17l3 3 3-3M19 20v-7"/></svg>'
)
DEAD_LETTERS_SHOWN = 100
VALUE_SHOWN = 2000


def _authorized() -> Any:
    """Airflow's check: an authenticated user allowed to read DAGs."""
    from airflow.api_fastapi.core_api.security import requires_access_dag

    return Depends(requires_access_dag("GET"))


def _templates() -> Environment:
    env = Environment(
        loader=PackageLoader("cdclake_airflow.view", "templates"),
        autoescape=select_autoescape(["html"]),
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters["ts"] = lambda d: d.strftime("%Y-%m-%d %H:%M:%S") if d else "-"
    env.filters["secs"] = lambda s: "-" if s is None else (f"{s:.1f} s" if s < 120 else f"{s / 60:.1f} min")
    env.filters["num"] = lambda n: "-" if n is None else f"{n:,}"
    env.filters["clip"] = lambda text, n=VALUE_SHOWN: (
        text if text is None or len(text) <= n else text[:n] + f"… ({len(text) - n:,} more characters)"
    )
    return env


def _chart(view: SourceView) -> Markup:
    points = [Point(b.committed_at, b.throughput, b.latency_s) for b in view.batches.value or []]
    return Markup(throughput_latency_svg(points, f"throughput and latency of {view.name}"))  # noqa: S704 - our SVG


def _source(name: str) -> SourceView:
    if name not in {s.name for s in deployment_specs()}:
        raise HTTPException(status_code=404, detail=f"no source {name!r} in this deployment")
    return source_views([name])[0]


def create_app() -> FastAPI:
    """The app Airflow mounts (:mod:`cdclake_airflow.plugin` builds it on its first request)."""
    app = FastAPI(title="cdclake CDC view", docs_url=None, redoc_url=None, openapi_url=None)
    router = APIRouter(dependencies=[_authorized()])
    templates = _templates()

    @app.get("/static/icon.svg", include_in_schema=False)
    def icon() -> Response:  # the navigation entry's icon: public, like the UI's own assets
        return Response(ICON_SVG, media_type="image/svg+xml", headers={"Cache-Control": "max-age=86400"})

    def page(request: Request, template: str, **context: Any) -> HTMLResponse:
        root = request.scope.get("root_path", "").rstrip("/")
        html = templates.get_template(template).render(
            root=root, now=datetime.now(UTC), lake=environment_label(), chart=_chart, **context
        )
        return HTMLResponse(html)

    @router.get("/", response_class=HTMLResponse)
    def overview(request: Request) -> HTMLResponse:
        return page(request, "overview.html", views=source_views())

    @router.get("/sources/{source}", response_class=HTMLResponse)
    def source_page(request: Request, source: str) -> HTMLResponse:
        return page(request, "source.html", view=_source(source), tab=False)

    @router.get("/dag/{dag_id}", response_class=HTMLResponse)
    def dag_tab(request: Request, dag_id: str) -> HTMLResponse:
        name = dag_source(dag_id)
        if name is not None and name in {s.name for s in deployment_specs()}:
            return page(request, "source.html", view=_source(name), tab=True)
        return page(request, "overview.html", views=source_views(), note=f"{dag_id} is not an ingest DAG")

    @router.get("/sources/{source}/dead-letters", response_class=HTMLResponse)
    def dead_letters_page(
        request: Request, source: str, batch_id: str | None = None, limit: int = Query(DEAD_LETTERS_SHOWN, le=1000)
    ) -> HTMLResponse:
        from cdclake.monitor import LakeMonitor

        view = _source(source)
        rows = LakeMonitor().dead_letters(source, limit=limit, batch_id=batch_id)
        return page(request, "dead_letters.html", view=view, rows=rows, batch_id=batch_id, limit=limit)

    @router.get("/api/sources")
    def sources_json() -> JSONResponse:
        return JSONResponse([v.to_json() for v in source_views()])

    @router.get("/api/sources/{source}")
    def source_json(source: str) -> JSONResponse:
        return JSONResponse(_source(source).to_json())

    @router.get("/api/sources/{source}/dead-letters")
    def dead_letters_json(
        source: str, batch_id: str | None = None, limit: int = Query(DEAD_LETTERS_SHOWN, le=1000)
    ) -> JSONResponse:
        from cdclake.monitor import LakeMonitor

        _source(source)
        rows = LakeMonitor().dead_letters(source, limit=limit, batch_id=batch_id)
        return JSONResponse(
            [{**r, "recorded_at": r["recorded_at"].isoformat() if r.get("recorded_at") else None} for r in rows]
        )

    app.include_router(router)
    return app
