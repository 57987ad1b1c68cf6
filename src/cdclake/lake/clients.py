"""The lake's pyiceberg catalogs, with timeouts and bounded retries (:meth:`cdclake.lake.LakeConfig.open_catalog`).

* **REST.** pyiceberg 0.12 has no catalog property for a request timeout or for retries: its REST client
  calls ``requests`` without a timeout, so an unresponsive catalog server hangs the caller. The catalog
  class :class:`LakeRestCatalog` mounts :func:`rest_adapter` on every ``requests`` session it creates. This
  includes the session of the ``/v1/config`` call made while the catalog is constructed, which is
  why it overrides ``_create_session`` rather than patching ``catalog._session`` afterwards. Every
  request times out after :data:`REST_TIMEOUT_S`. A connection that cannot be opened is tried again,
  whatever the method. An idempotent request (GET, HEAD, OPTIONS) is also tried again when its answer
  times out or is 429/502/503/504. At most :data:`REST_RETRIES` retries are made, with exponential
  backoff. A POST (a commit, a create) that reached the server is never sent twice.
* **Embedded (SQLite).** pyiceberg's ``SqlCatalog`` passes nothing but the URI to ``create_engine``, so
  SQLite's busy timeout goes in the URI (``?timeout=``, Python's ``sqlite3`` ``timeout``,
  :data:`SQLITE_BUSY_TIMEOUT_S`). With it, an operation waits that long for another writer (a Spark
  batch commits through the same file) to release its lock. SQLite refuses some locks at once, without
  waiting: a read transaction of the WAL journal whose snapshot another writer has moved past cannot
  become a write one. :class:`LakeSqlCatalog` therefore runs each catalog operation cdclake performs
  (loads, creates, commits, listings) through :func:`retry_on_lock`. An operation that still fails with
  ``database is locked`` after :data:`LOCK_ATTEMPTS` attempts raises :class:`CatalogLockedError`.

These are constants, not settings: they bound calls that normally take milliseconds.
"""

from __future__ import annotations

import logging
import sqlite3
import time
from collections.abc import Callable, Mapping
from functools import partial
from typing import Any, TypeVar
from urllib.parse import parse_qs, urlsplit

from pyiceberg.catalog import Catalog
from pyiceberg.catalog.rest import RestCatalog
from pyiceberg.catalog.sql import SqlCatalog
from pyiceberg.utils.config import Config, merge_config
from requests import PreparedRequest, Response, Session
from requests.adapters import HTTPAdapter
from sqlalchemy.exc import OperationalError
from urllib3.util.retry import Retry

from cdclake.exceptions import CdcError, ConfigError

logger = logging.getLogger(__name__)


def wait(seconds: float) -> None:
    """How the retries of a locked catalog wait (:func:`time.sleep`); tests replace it, not the process's
    ``time.sleep``, which every thread shares."""
    time.sleep(seconds)


T = TypeVar("T")

#: ``(connect, read)`` seconds of every request to a REST catalog.
REST_TIMEOUT_S: tuple[float, float] = (10.0, 60.0)
#: Retries of a REST request (see the module docstring for which ones).
REST_RETRIES = 3
#: urllib3's backoff factor: no wait before the first retry, then 1 s and 2 s.
REST_BACKOFF_FACTOR = 0.5
#: Answers after which an idempotent REST request is retried (honouring ``Retry-After``).
REST_RETRY_STATUSES = frozenset({429, 502, 503, 504})
#: Methods retried after the request reached the server: the idempotent ones.
REST_RETRY_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})

#: Seconds SQLite waits for another connection's lock before it answers ``database is locked``.
SQLITE_BUSY_TIMEOUT_S = 15.0
#: Attempts of a catalog operation that finds the SQLite catalog locked (the first one included).
LOCK_ATTEMPTS = 5
#: Wait before the second attempt; it doubles for each further one, up to :data:`LOCK_MAX_BACKOFF_S`.
LOCK_BACKOFF_S = 0.25
LOCK_MAX_BACKOFF_S = 4.0

_LOCKED_MESSAGES = ("database is locked", "database table is locked")


class CatalogLockedError(CdcError, RuntimeError):
    """The lake's SQLite catalog stayed locked through every attempt of an operation; names the operation
    and the catalog."""

    def __init__(self, message: str, *, operation: str, catalog: str, attempts: int) -> None:
        super().__init__(message)
        self.operation = operation
        self.catalog = catalog
        self.attempts = attempts


def is_locked(exc: BaseException) -> bool:
    """True when ``exc`` is SQLite's ``database is locked`` (raised by SQLAlchemy or by ``sqlite3``)."""
    return isinstance(exc, OperationalError | sqlite3.OperationalError) and any(
        message in str(exc) for message in _LOCKED_MESSAGES
    )


def retry_on_lock(
    operation: str,
    catalog: str,
    call: Callable[[], T],
    *,
    attempts: int = LOCK_ATTEMPTS,
    backoff_s: float = LOCK_BACKOFF_S,
    max_backoff_s: float = LOCK_MAX_BACKOFF_S,
    sleep: Callable[[float], object] | None = None,
) -> T:
    """``call()``, called again while it fails with ``database is locked``, at most ``attempts`` times in all.

    The waits between attempts double from ``backoff_s`` up to ``max_backoff_s``; each retry is logged as a
    warning naming ``operation`` and ``catalog``. Any other error is raised at once.

    Args:
        operation: what ``call`` does, for the log and the error (``commit_table cdc_audit.ledger``).
        catalog: the catalog's name.
        call: the operation.
        attempts: attempts in all (at least 1).
        sleep: waits between attempts (default :func:`wait`).

    Raises:
        CatalogLockedError: the last attempt found the catalog locked too (chained to SQLite's error).
    """
    attempts = max(attempts, 1)
    for attempt in range(1, attempts + 1):
        try:
            return call()
        except Exception as exc:
            if not is_locked(exc):
                raise
            if attempt == attempts:
                raise CatalogLockedError(
                    f"{operation} on catalog {catalog!r}: the SQLite catalog was still locked after {attempts} "
                    f"attempts ({_first_line(exc)}); another process (a Spark job, a CLI command) is holding a "
                    "write transaction on it; run this again once it is done",
                    operation=operation,
                    catalog=catalog,
                    attempts=attempts,
                ) from exc
            delay = min(max_backoff_s, backoff_s * 2 ** (attempt - 1))
            logger.warning(
                "%s on catalog %s: database is locked (attempt %d of %d); retrying in %.2f s",
                operation,
                catalog,
                attempt,
                attempts,
                delay,
            )
            (sleep or wait)(delay)
    raise AssertionError("unreachable")  # pragma: no cover - the loop returns or raises


def _first_line(exc: BaseException) -> str:
    return str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__


def _describe(target: Any) -> str:
    """A table or namespace identifier (a ``Table``, a tuple or a string) for the log."""
    if callable(getattr(target, "name", None)):
        target = target.name()
    return ".".join(target) if isinstance(target, tuple) else str(target)


# -- REST -----------------------------------------------------------------------------------------------


class _TimeoutAdapter(HTTPAdapter):
    """An ``HTTPAdapter`` that gives every request without a timeout of its own ``timeout``."""

    def __init__(self, timeout: float | tuple[float, float], **kwargs: Any) -> None:
        self.timeout = timeout
        super().__init__(**kwargs)

    def send(self, request: PreparedRequest, *args: Any, **kwargs: Any) -> Response:
        if kwargs.get("timeout") is None:
            kwargs["timeout"] = self.timeout
        return super().send(request, *args, **kwargs)


def rest_adapter(
    timeout: float | tuple[float, float] = REST_TIMEOUT_S,
    retries: int = REST_RETRIES,
    backoff_factor: float = REST_BACKOFF_FACTOR,
) -> HTTPAdapter:
    """The ``requests`` adapter of the REST catalog's sessions: ``timeout`` seconds (or ``(connect, read)``)
    per request and the bounded retries of the module docstring."""
    retry = Retry(
        total=retries,
        connect=retries,
        read=retries,
        status=retries,
        backoff_factor=backoff_factor,
        status_forcelist=REST_RETRY_STATUSES,
        allowed_methods=REST_RETRY_METHODS,
        respect_retry_after_header=True,
        # after the last retry the answer goes back to pyiceberg, which raises its own error for the status
        raise_on_status=False,
    )
    return _TimeoutAdapter(timeout, max_retries=retry)


def with_rest_timeouts(session: Session, adapter: HTTPAdapter | None = None) -> Session:
    """``session`` with ``adapter`` (default :func:`rest_adapter`) mounted for ``http://`` and ``https://``."""
    adapter = adapter or rest_adapter()
    session.mount("http://", adapter)
    session.mount("https://", adapter)
    return session


class LakeRestCatalog(RestCatalog):
    """pyiceberg's REST catalog whose sessions time out and retry (:func:`with_rest_timeouts`).

    pyiceberg mounts its SigV4 adapter (``rest.sigv4-enabled``, which cdclake does not set) on the catalog
    URI itself; that longer prefix would take precedence over these adapters.
    """

    def _create_session(self) -> Session:
        return with_rest_timeouts(super()._create_session())


# -- SQLite ---------------------------------------------------------------------------------------------


def with_busy_timeout(uri: str, seconds: float = SQLITE_BUSY_TIMEOUT_S) -> str:
    """A ``sqlite:///`` SQLAlchemy URI with ``timeout=seconds`` (SQLite's busy timeout), unless it has one."""
    parts = urlsplit(uri)
    if not parts.scheme.startswith("sqlite") or "timeout" in parse_qs(parts.query):
        return uri
    return f"{uri}{'&' if parts.query else '?'}timeout={seconds:g}"


class LakeSqlCatalog(SqlCatalog):
    """pyiceberg's SQL catalog whose operations are retried while SQLite answers ``database is locked``
    (:func:`retry_on_lock`).

    Retrying a commit is safe: a locked commit did not happen, and the next attempt checks the same
    requirements against the table as it is then (a commit that another writer overtook fails with
    ``CommitFailedException``, as without the retry).
    """

    def _retried(self, operation: str, call: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        target = args[0] if args else next(iter(kwargs.values()), "")
        return retry_on_lock(f"{operation} {_describe(target)}".rstrip(), self.name, partial(call, *args, **kwargs))

    def create_tables(self) -> None:
        """Create the catalog's own tables when absent. Processes that open a fresh catalog at once race
        between SQLAlchemy's existence check and its ``CREATE TABLE``; the loser finds the tables made by the
        winner, which is what it wanted, so it checks again instead of failing."""
        for attempt in range(2):
            try:
                self._retried("create_tables", super().create_tables)
                return
            except OperationalError as exc:
                if "already exists" not in str(exc) or attempt:
                    raise

    def load_table(self, *args: Any, **kwargs: Any) -> Any:
        return self._retried("load_table", super().load_table, *args, **kwargs)

    def create_table(self, *args: Any, **kwargs: Any) -> Any:
        return self._retried("create_table", super().create_table, *args, **kwargs)

    def commit_table(self, *args: Any, **kwargs: Any) -> Any:
        return self._retried("commit_table", super().commit_table, *args, **kwargs)

    def drop_table(self, *args: Any, **kwargs: Any) -> None:
        self._retried("drop_table", super().drop_table, *args, **kwargs)

    def create_namespace(self, *args: Any, **kwargs: Any) -> None:
        self._retried("create_namespace", super().create_namespace, *args, **kwargs)

    def namespace_exists(self, *args: Any, **kwargs: Any) -> bool:
        return self._retried("namespace_exists", super().namespace_exists, *args, **kwargs)

    def list_tables(self, *args: Any, **kwargs: Any) -> Any:
        return self._retried("list_tables", super().list_tables, *args, **kwargs)

    def list_namespaces(self, *args: Any, **kwargs: Any) -> Any:
        return self._retried("list_namespaces", super().list_namespaces, *args, **kwargs)

    def load_namespace_properties(self, *args: Any, **kwargs: Any) -> Any:
        return self._retried("load_namespace_properties", super().load_namespace_properties, *args, **kwargs)


# -- opening ---------------------------------------------------------------------------------------------


def open_catalog(properties: Mapping[str, str]) -> Catalog:
    """The catalog of ``LakeConfig.pyiceberg_properties()``: a :class:`LakeRestCatalog` (``type`` ``rest``) or a
    :class:`LakeSqlCatalog` (``sql``, with :func:`with_busy_timeout`). As with pyiceberg's ``load_catalog``,
    the catalog's entry in ``.pyiceberg.yaml`` and its ``PYICEBERG_CATALOG__<NAME>__*`` variables (REST
    credentials, say) are merged under ``properties``.

    Raises:
        ConfigError: ``properties`` name another kind of catalog.
        CatalogLockedError: the SQLite catalog stayed locked while it was opened.
    """
    props = dict(properties)
    name = props.pop("name")
    conf: dict[str, Any] = dict(merge_config(Config().get_catalog_config(name) or {}, props))
    kind = str(conf.pop("type", "")).lower()
    if kind == "rest":
        return LakeRestCatalog(name, **conf)
    if kind == "sql":
        conf["uri"] = with_busy_timeout(str(conf["uri"]))
        return retry_on_lock("open", name, partial(LakeSqlCatalog, name, **conf))
    raise ConfigError(f"catalog {name!r}: type {kind!r} is not one cdclake opens (rest or sql)")
