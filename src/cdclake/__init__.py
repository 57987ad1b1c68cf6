"""cdclake: Debezium change events from Kafka into Apache Iceberg, orchestrated by Apache Airflow.

The package holds all domain logic; ``dags/``, ``jobs/`` and ``plugins/`` are thin adapters over it.
"""

from __future__ import annotations

__version__ = "0.1.0"
