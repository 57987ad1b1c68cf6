"""What one Airflow deployment runs: which sources, how often (read when the DAG files are parsed).

Two environment variables of the Airflow components (never connections or Variables: DAG files do not touch
those while parsing):

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
==========================  ================================  ==========================================

The local stack sets ``CDC_SOURCES=postgres,mariadb`` (the databases it runs), ``CDC_INGEST_INTERVAL=1m``, and
``CDC_SPARK_POOL=cdc_spark``, a pool of ``CDC_SPARK_SLOTS`` slots (default 1: on two cores, Spark drivers side by
side each take several times longer than one after the other).
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from datetime import timedelta

from cdclake.connectors import ConnectorSpec
from cdclake.exceptions import ConfigError

SOURCES_ENV = "CDC_SOURCES"
INGEST_INTERVAL_ENV = "CDC_INGEST_INTERVAL"
INGEST_INTERVAL_DEFAULT = timedelta(minutes=5)
MIN_INGEST_INTERVAL = timedelta(seconds=10)
SPARK_POOL_ENV = "CDC_SPARK_POOL"
SPARK_POOL_DEFAULT = "default_pool"
_INTERVAL = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(s|m|h)?\s*$")
_UNITS = {"s": 1, "m": 60, "h": 3600, None: 1}


def enabled_specs(specs: Mapping[str, ConnectorSpec], environ: Mapping[str, str] | None = None) -> list[ConnectorSpec]:
    """The specs the deployment runs, in name order (``CDC_SOURCES``; unset or empty: all of them).

    Raises:
        ConfigError: naming the variable, when it lists a spec that does not exist.
    """
    raw = (os.environ if environ is None else environ).get(SOURCES_ENV, "")
    names = [n.strip() for n in raw.split(",") if n.strip()]
    if not names:
        return [specs[name] for name in sorted(specs)]
    unknown = sorted(set(names) - set(specs))
    if unknown:
        raise ConfigError(
            f"{SOURCES_ENV}={raw!r} names unknown spec(s) {', '.join(unknown)}; known: {', '.join(sorted(specs))}"
        )
    return [specs[name] for name in sorted(set(names))]


def ingest_interval(environ: Mapping[str, str] | None = None) -> timedelta:
    """The ingest DAGs' schedule (``CDC_INGEST_INTERVAL``, default 5 minutes).

    Raises:
        ConfigError: naming the variable, when the value is not a duration of at least 10 seconds.
    """
    raw = (os.environ if environ is None else environ).get(INGEST_INTERVAL_ENV, "").strip()
    if not raw:
        return INGEST_INTERVAL_DEFAULT
    match = _INTERVAL.match(raw)
    if not match:
        raise ConfigError(f"{INGEST_INTERVAL_ENV}={raw!r} is not a duration such as 30s, 1m, 2h or 300")
    interval = timedelta(seconds=float(match.group(1)) * _UNITS[match.group(2)])
    if interval < MIN_INGEST_INTERVAL:
        raise ConfigError(f"{INGEST_INTERVAL_ENV}={raw!r} is shorter than {MIN_INGEST_INTERVAL.seconds} seconds")
    return interval


def spark_pool(environ: Mapping[str, str] | None = None) -> str:
    """The Airflow pool of the Spark job tasks (``CDC_SPARK_POOL``, default Airflow's ``default_pool``)."""
    return (os.environ if environ is None else environ).get(SPARK_POOL_ENV, "").strip() or SPARK_POOL_DEFAULT
