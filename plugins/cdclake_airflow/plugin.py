"""The cdclake Airflow plugin (entry point ``airflow.plugins``): the CDC view in the Airflow UI.

* a FastAPI app mounted by the API server at ``/cdclake`` (:mod:`cdclake_airflow.view.app`), behind Airflow's
  authentication;
* ``CDC`` in the navigation bar: every source at a glance;
* a ``CDC source`` tab on each DAG, showing the source of ``cdc_ingest__<source>`` and ``cdc_follow__<source>``.

Every Airflow process loads plugins, so this module stays light: the app (FastAPI, Jinja, pyiceberg) is built
by the API server on its first request.
"""

from __future__ import annotations

import threading
from typing import Any

from airflow.plugins_manager import AirflowPlugin

URL_PREFIX = "/cdclake"


class LazyApp:
    """An ASGI app that builds :func:`cdclake_airflow.view.app.create_app` when it is first called."""

    def __init__(self) -> None:
        self._app: Any = None
        self._lock = threading.Lock()

    def _get(self) -> Any:
        with self._lock:
            if self._app is None:
                from cdclake_airflow.view.app import create_app

                self._app = create_app()
            return self._app

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        await self._get()(scope, receive, send)


class CdcLakePlugin(AirflowPlugin):
    """The CDC view (see the module docstring)."""

    name = "cdclake"
    fastapi_apps = [{"app": LazyApp(), "url_prefix": URL_PREFIX, "name": "cdclake CDC view"}]
    external_views = [
        {
            "name": "CDC",
            "href": "cdclake/",
            "destination": "nav",
            "url_route": "cdc",
            "icon": "cdclake/static/icon.svg",
        },
        {
            "name": "CDC source",
            "href": "cdclake/dag/{DAG_ID}",
            "destination": "dag",
            "url_route": "cdc-source",
        },
    ]
