"""Airflow adapters for cdclake: Kafka Connect and Debezium-signal hooks, operators, sensors, triggers.

Airflow puts ``plugins/`` on ``sys.path``, so import as ``cdclake_airflow.hooks.kafka_connect``.
All domain logic lives in the ``cdclake`` package; these modules only wire it to Airflow.
"""

from __future__ import annotations
