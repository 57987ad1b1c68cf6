"""Catalog configuration shared by Spark (Java Iceberg) and pyiceberg.

Two kinds, chosen by configuration only:

* ``embedded`` (default): an Iceberg JDBC catalog in a SQLite file plus a warehouse directory,
  both under the lake directory (``.lake/`` by default). Spark and pyiceberg's ``SqlCatalog`` share
  the same SQLite tables (``iceberg_tables``, ``iceberg_namespace_properties``); the catalog name is
  the ``catalog_name`` column, so both sides use :data:`CATALOG_NAME`.
* ``rest``: an Iceberg REST catalog (``CDC_LAKE_URI``) with its warehouse, optionally on S3-compatible
  object storage (``CDC_LAKE_S3_ENDPOINT`` etc.).

Environment variables (read by :mod:`cdclake.settings`): ``CDC_LAKE_KIND`` (``embedded`` | ``rest``),
``CDC_LAKE_DIR``, ``CDC_LAKE_URI``, ``CDC_LAKE_WAREHOUSE``, ``CDC_LAKE_S3_ENDPOINT``, ``CDC_LAKE_S3_ACCESS_KEY_ID``,
``CDC_LAKE_S3_SECRET_ACCESS_KEY``, ``CDC_LAKE_S3_REGION``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from cdclake.exceptions import ConfigError
from cdclake.paths import lake_dir
from cdclake.settings import LakeKind, Settings, settings

if TYPE_CHECKING:
    from pyiceberg.catalog import Catalog

CATALOG_NAME = "lake"
#: The namespace of the lake's audit tables (ledger, locks, transactions, dead letters, ...).
AUDIT_NAMESPACE = "cdc_audit"


def unquote(name: str) -> tuple[str, ...]:
    """The parts of a Spark SQL identifier, every part back-quoted (```lake`.`ns`.`t```) or plain (``lake.ns.t``)."""
    if name.startswith("`"):
        return tuple(part[1:-1].replace("``", "`") for part in re.findall(r"`(?:[^`]|``)*`", name))
    return tuple(name.split("."))


@dataclass(frozen=True)
class LakeConfig:
    """How to reach the lake's Iceberg catalog.

    Attributes:
        kind: ``embedded`` or ``rest``.
        root: lake directory of the embedded catalog.
        uri: REST catalog URI (``rest`` only).
        warehouse: warehouse location; defaults to ``<root>/warehouse`` for ``embedded``.
        s3: S3FileIO properties for ``rest`` with object storage (``s3.endpoint``, ...).
    """

    kind: LakeKind = "embedded"
    root: Path | None = None
    uri: str | None = None
    warehouse: str | None = None
    s3: dict[str, str] = field(default_factory=dict)

    @classmethod
    def embedded(cls, root: Path | str | None = None) -> LakeConfig:
        """Embedded lake in ``root`` (default: :func:`cdclake.paths.lake_dir`)."""
        return cls(kind="embedded", root=Path(root).resolve() if root else lake_dir())

    @classmethod
    def from_env(cls, root: Path | str | None = None) -> LakeConfig:
        """The lake of this process's ``CDC_LAKE_*`` variables (:meth:`from_settings` of :func:`cdclake.settings.settings`).

        Raises:
            ConfigError: on a variable that does not parse, or a REST lake without ``CDC_LAKE_URI``.
        """
        return cls.from_settings(settings(), root)

    @classmethod
    def from_settings(cls, config: Settings, root: Path | str | None = None) -> LakeConfig:
        """The lake of ``CDC_LAKE_*`` settings; ``root`` overrides ``CDC_LAKE_DIR``.

        Raises:
            ConfigError: on a REST lake without ``CDC_LAKE_URI``.
        """
        if config.lake_kind == "embedded":
            return cls.embedded(root or lake_dir(config))
        if not config.lake_uri:
            raise ConfigError("CDC_LAKE_URI must be set to the REST catalog URL when CDC_LAKE_KIND=rest")
        s3 = {
            key: value
            for key, value in (
                ("s3.endpoint", config.lake_s3_endpoint),
                ("s3.access-key-id", config.lake_s3_access_key_id),
                ("s3.secret-access-key", config.lake_s3_secret_access_key),
                ("s3.region", config.lake_s3_region),
            )
            if value
        }
        if s3:
            s3["s3.path-style-access"] = "true"
        return cls(kind="rest", uri=config.lake_uri, warehouse=config.lake_warehouse, s3=s3)

    @classmethod
    def from_spark_conf(cls, conf: Mapping[str, str]) -> LakeConfig:
        """The lake a Spark session opens as catalog :data:`CATALOG_NAME` (the inverse of :meth:`spark_conf`).

        Args:
            conf: the session's settings (``dict(spark.sparkContext.getConf().getAll())``).

        Raises:
            ConfigError: the session has no such catalog, or one of another kind.
        """
        prefix = f"spark.sql.catalog.{CATALOG_NAME}"
        kind = conf.get(f"{prefix}.type")
        if kind == "jdbc":
            uri = conf.get(f"{prefix}.uri", "")
            if not uri.startswith("jdbc:sqlite:"):
                raise ConfigError(f"{prefix}.uri={uri!r} is not the embedded lake's SQLite catalog")
            db = Path(uri.removeprefix("jdbc:sqlite:").split("?", 1)[0])
            return cls(kind="embedded", root=db.parent, warehouse=conf.get(f"{prefix}.warehouse"))
        if kind == "rest":
            s3 = {
                key.removeprefix(prefix + "."): value for key, value in conf.items() if key.startswith(f"{prefix}.s3.")
            }
            return cls(kind="rest", uri=conf.get(f"{prefix}.uri"), warehouse=conf.get(f"{prefix}.warehouse"), s3=s3)
        raise ConfigError(f"the Spark session has no cdclake lake catalog ({prefix}.type is {kind!r})")

    # -- embedded layout -------------------------------------------------------------------------
    @property
    def catalog_db(self) -> Path:
        """SQLite file of the embedded catalog."""
        assert self.root is not None
        return self.root / "catalog.db"

    @property
    def warehouse_location(self) -> str:
        """Warehouse location as a URI."""
        if self.warehouse:
            return self.warehouse
        if self.kind == "embedded":
            assert self.root is not None
            return (self.root / "warehouse").as_uri()
        raise ConfigError("CDC_LAKE_WAREHOUSE must be set for a REST lake")

    def ensure_dirs(self) -> None:
        """Create the embedded lake's directories (no-op for REST)."""
        if self.kind == "embedded":
            assert self.root is not None
            (self.root / "warehouse").mkdir(parents=True, exist_ok=True)

    # -- client properties -----------------------------------------------------------------------
    def open_catalog(self) -> Catalog:
        """This lake's pyiceberg catalog, with timeouts and bounded retries (:mod:`cdclake.lake.clients`).

        A REST catalog's requests time out and are retried with backoff; the embedded SQLite catalog waits
        for another writer's lock, and its operations are retried while it stays locked.

        Raises:
            CatalogLockedError: the embedded catalog stayed locked while it was opened.
        """
        from cdclake.lake.clients import open_catalog

        return open_catalog(self.pyiceberg_properties())

    def pyiceberg_properties(self) -> dict[str, str]:
        """Properties for ``pyiceberg.catalog.load_catalog(**props)`` that open this lake (without the timeouts
        and retries of :meth:`open_catalog`)."""
        if self.kind == "embedded":
            return {
                "name": CATALOG_NAME,
                "type": "sql",
                "uri": f"sqlite:///{self.catalog_db}",
                "warehouse": self.warehouse_location,
            }
        props = {"name": CATALOG_NAME, "type": "rest", "uri": str(self.uri)}
        if self.warehouse:
            props["warehouse"] = self.warehouse
        props.update(self.s3)
        return props

    def spark_conf(self) -> dict[str, str]:
        """Spark SQL catalog settings that register this lake as catalog :data:`CATALOG_NAME`."""
        prefix = f"spark.sql.catalog.{CATALOG_NAME}"
        conf = {prefix: "org.apache.iceberg.spark.SparkCatalog"}
        if self.kind == "embedded":
            conf.update(
                {
                    f"{prefix}.type": "jdbc",
                    # WAL lets Spark and pyiceberg use the catalog at the same time without SQLITE_BUSY.
                    f"{prefix}.uri": f"jdbc:sqlite:{self.catalog_db}?journal_mode=WAL",
                    f"{prefix}.jdbc.schema-version": "V1",
                    f"{prefix}.warehouse": self.warehouse_location,
                }
            )
            return conf
        conf.update({f"{prefix}.type": "rest", f"{prefix}.uri": str(self.uri)})
        if self.warehouse:
            conf[f"{prefix}.warehouse"] = self.warehouse
        if self.s3:
            conf[f"{prefix}.io-impl"] = "org.apache.iceberg.aws.s3.S3FileIO"
            conf.update({f"{prefix}.{key}": value for key, value in self.s3.items()})
            if "s3.region" in self.s3:  # Java's AWS clients take their region from client.region
                conf[f"{prefix}.client.region"] = self.s3["s3.region"]
        return conf
