"""Connector health: which connectors or tasks are FAILED, missing or not running."""

from __future__ import annotations

from collections.abc import Mapping

from cdclake.connect import ConnectorStatus


def failed_connectors(expected: Mapping[str, str], statuses: Mapping[str, ConnectorStatus]) -> list[str]:
    """The registered connectors of ``expected`` (spec name -> connector name) that are FAILED or have a FAILED
    task: what the health check restarts (their failed tasks only) before it judges them."""
    return [c for c in expected.values() if c in statuses and statuses[c].is_failed]


def connector_health_problems(
    expected: Mapping[str, str], statuses: Mapping[str, ConnectorStatus]
) -> tuple[list[str], list[str]]:
    """Compare the connectors the specs expect with what Connect reports.

    Args:
        expected: spec name -> connector name.
        statuses: connector name -> status (``GET /connectors?expand=status``).

    Returns:
        ``(failures, warnings)``. A failure is a FAILED connector or task (with the worker's trace)
        or a connector that is not registered; a warning is a connector that is neither RUNNING nor
        FAILED (PAUSED, STOPPED, UNASSIGNED, no tasks yet).
    """
    failures: list[str] = []
    warnings: list[str] = []
    for spec_name, connector in expected.items():
        status = statuses.get(connector)
        if status is None:
            failures.append(f"connector {connector} (spec {spec_name}) is not registered; run the cdc_connectors DAG")
        elif status.is_failed:
            failures.append(status.failure_summary())
        elif not status.is_running:
            warnings.append(f"connector {status.describe()} (spec {spec_name}) is not RUNNING")
    return failures, warnings
