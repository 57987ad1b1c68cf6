"""What one Airflow deployment runs: which sources, how often (read when the DAG files are parsed).

Environment variables of the Airflow components, read by :mod:`cdclake.settings` (never connections or
Variables: DAG files do not touch those while parsing):

==========================  ================================  ==========================================
variable                    default                           meaning
==========================  ================================  ==========================================
``CDC_SOURCES``             every spec in include/connectors  comma-separated spec names the deployment
                                                              runs: only these get a ``cdc_ingest__<name>``
                                                              DAG, and appear in the DAGs' ``source`` Params
``CDC_INGEST_INTERVAL``     ``5m``                            the ingest DAGs' schedule: ``90s``, ``1m``,
                                                              ``2h`` or seconds (at least 10 s)
``CDC_SPARK_POOL``          ``default_pool``                  the Airflow pool of every Spark job task
                                                              (its slots bound how many run at once)
``CDC_FOLLOW_SOURCES``      none                              comma-separated sources (among the
                                                              deployment's) that also get a
                                                              ``cdc_follow__<name>`` DAG
``CDC_FOLLOW_RUN_FOR``      ``30m``                           how long one follower run follows
==========================  ================================  ==========================================

The local stack sets ``CDC_SOURCES=postgres,mariadb`` (the databases it runs), ``CDC_INGEST_INTERVAL=1m``, and
``CDC_SPARK_POOL=cdc_spark``, a pool of ``CDC_SPARK_SLOTS`` slots (default 1: on two cores, Spark drivers side by
side each take several times longer than one after the other).
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import timedelta

from cdclake.connectors import ConnectorSpec
from cdclake.exceptions import ConfigError
from cdclake.settings import Settings, settings

SOURCES_ENV = Settings.env_name("sources")


def enabled_specs(specs: Mapping[str, ConnectorSpec], config: Settings | None = None) -> list[ConnectorSpec]:
    """The specs the deployment runs, in name order (``CDC_SOURCES`` of ``config``, default
    :func:`cdclake.settings.settings`; unset or empty: all of them).

    Raises:
        ConfigError: naming the variable, when it lists a spec that does not exist.
    """
    names = (config or settings()).sources
    if not names:
        return [specs[name] for name in sorted(specs)]
    unknown = sorted(set(names) - set(specs))
    if unknown:
        raise ConfigError(
            f"{SOURCES_ENV}={','.join(names)!r} names unknown spec(s) {', '.join(unknown)}; "
            f"known: {', '.join(sorted(specs))}"
        )
    return [specs[name] for name in sorted(set(names))]


def followed_specs(specs: Mapping[str, ConnectorSpec], config: Settings | None = None) -> list[ConnectorSpec]:
    """The specs ingested continuously (``CDC_FOLLOW_SOURCES`` of ``config``, default
    :func:`cdclake.settings.settings`; unset or empty: none), in name order.

    Raises:
        ConfigError: naming the variable, when it lists a spec the deployment does not run (``CDC_SOURCES``).
    """
    config = config or settings()
    names = set(config.follow_sources)
    enabled = {spec.name: spec for spec in enabled_specs(specs, config)}
    unknown = sorted(names - set(enabled))
    if unknown:
        raise ConfigError(
            f"{Settings.env_name('follow_sources')}={','.join(config.follow_sources)!r} names source(s) "
            f"{', '.join(unknown)} the deployment does not run; it runs: {', '.join(sorted(enabled))} "
            f"({SOURCES_ENV})"
        )
    return [enabled[name] for name in sorted(names)]


def follow_run_for(config: Settings | None = None) -> timedelta:
    """How long one run of a follower DAG follows (``CDC_FOLLOW_RUN_FOR``)."""
    return (config or settings()).follow_run_for


def ingest_interval(config: Settings | None = None) -> timedelta:
    """The ingest DAGs' schedule (``CDC_INGEST_INTERVAL`` of ``config``, default :func:`cdclake.settings.settings`)."""
    return (config or settings()).ingest_interval


def spark_pool(config: Settings | None = None) -> str:
    """The Airflow pool of the Spark job tasks (``CDC_SPARK_POOL`` of ``config``, default
    :func:`cdclake.settings.settings`)."""
    return (config or settings()).spark_pool
