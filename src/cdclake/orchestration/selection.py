"""Which connector specs a DAG run works on."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence

from cdclake.connectors import ConnectorSpec


def spec_names(specs: Mapping[str, ConnectorSpec] | Iterable[ConnectorSpec]) -> list[str]:
    """Sorted spec names (used as the enum of DAG Params); takes ``load_specs()`` or a list of specs."""
    values = specs.values() if isinstance(specs, Mapping) else specs
    return sorted(spec.name for spec in values)


def select_specs(
    specs: Sequence[ConnectorSpec],
    requested: Sequence[str] | None,
    is_configured: Callable[[ConnectorSpec], bool],
) -> tuple[list[ConnectorSpec], list[ConnectorSpec]]:
    """Split specs into the ones to act on and the ones skipped because their connection is not configured.

    Args:
        specs: every known spec.
        requested: spec names asked for; empty or None means every spec whose source connection
            is configured (a deployment only defines the connections of the sources it runs).
        is_configured: whether the spec's Airflow connection exists.

    Returns:
        ``(selected, skipped)``, both in the order of ``specs``.

    Raises:
        ValueError: when a requested name is not a spec, or a requested spec has no connection.
    """
    by_name = {spec.name: spec for spec in specs}
    if requested:
        unknown = sorted(set(requested) - set(by_name))
        if unknown:
            raise ValueError(f"unknown connector spec(s) {', '.join(unknown)}; known: {', '.join(sorted(by_name))}")
        chosen = [spec for spec in specs if spec.name in set(requested)]
        missing = [spec for spec in chosen if not is_configured(spec)]
        if missing:
            raise ValueError(
                "; ".join(
                    f"spec {spec.name}: Airflow connection {spec.connection_id!r} is not defined "
                    f"(set AIRFLOW_CONN_{spec.connection_id.upper()})"
                    for spec in missing
                )
            )
        return chosen, []
    selected = [spec for spec in specs if is_configured(spec)]
    skipped = [spec for spec in specs if spec not in selected]
    return selected, skipped
