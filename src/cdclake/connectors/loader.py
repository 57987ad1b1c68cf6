"""Load and validate connector specs; every error names the file and the key path.

Example message::

    include/connectors/postgres.yaml: tables[1].lake.mode: must be one of upsert, append, scd2
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError
from pydantic_core import ErrorDetails

from cdclake.connectors.config import generated_keys
from cdclake.connectors.spec import (
    CONFIG_PROVIDER_REFERENCE,
    DATA_COLLECTION_PARTS,
    SNAPSHOT_MODES,
    ConnectorKind,
    ConnectorSpec,
    SignalChannel,
)
from cdclake.exceptions import CdcError, ConnectorSpecError
from cdclake.paths import project_home
from cdclake.settings import settings

SPEC_DIR_RELATIVE = Path("include") / "connectors"
SPEC_SUFFIXES = (".yaml", ".yml")

_PART = re.compile(r"^[A-Za-z_][A-Za-z0-9_$]*$")
_MONGO_PART = re.compile(r"^[A-Za-z0-9_$-]+$")
_SECRET_KEY = re.compile(r"password|secret|token|connection\.string", re.IGNORECASE)


def spec_dir() -> Path:
    """The default spec directory: ``CDC_SPEC_DIR``, else ``<project>/include/connectors``.

    Raises:
        NotInstalledError: when the project directory cannot be found (set ``CDC_HOME``).
    """
    configured = settings().spec_dir
    return configured.resolve() if configured else project_home() / SPEC_DIR_RELATIVE


def resolve_spec_path(spec: str | Path, directory: str | Path | None = None) -> Path:
    """Turn ``postgres``, ``postgres.yaml`` or a path into the spec file's path.

    A bare name is looked up in ``directory`` (default :func:`spec_dir`).
    """
    path = Path(spec)
    if path.is_absolute() or len(path.parts) > 1:
        return path
    base = Path(directory) if directory is not None else spec_dir()
    if path.suffix in SPEC_SUFFIXES:
        return base / path
    for suffix in SPEC_SUFFIXES:
        candidate = base / (path.name + suffix)
        if candidate.exists():
            return candidate
    return base / (path.name + SPEC_SUFFIXES[0])


def load_spec(path: str | Path, directory: str | Path | None = None) -> ConnectorSpec:
    """Load and validate one connector spec.

    Args:
        path: a spec file path, or a bare spec name looked up in ``directory``.
        directory: where bare names are looked up (default ``<project>/include/connectors``).

    Returns:
        The validated, frozen spec, with ``source_path`` set.

    Raises:
        ConnectorSpecError: when the file is missing, is not YAML, or is invalid; the message names the
            file and every offending key path.
    """
    file = resolve_spec_path(path, directory)
    shown = _display_path(file)
    try:
        raw = yaml.safe_load(file.read_text(encoding="utf-8"))
    except FileNotFoundError as exc:
        raise ConnectorSpecError(f"{shown}: connector spec not found") from exc
    except yaml.YAMLError as exc:
        raise ConnectorSpecError(f"{shown}: not valid YAML: {exc}") from exc
    if not isinstance(raw, dict):
        raise ConnectorSpecError(f"{shown}: a connector spec must be a YAML mapping, got {type(raw).__name__}")
    return parse_spec(raw, source=file)


def parse_spec(raw: dict[str, Any], *, source: Path | None = None) -> ConnectorSpec:
    """Validate an already-parsed spec mapping (``load_spec`` without the file read).

    Raises:
        ConnectorSpecError: listing ``<file>: <key path>: <problem>`` lines.
    """
    shown = _display_path(source) if source else "<spec>"
    if "source_path" in raw:
        raise ConnectorSpecError(f"{shown}: source_path: unknown key")
    try:
        spec = ConnectorSpec.model_validate(raw).model_copy(update={"source_path": source})
    except ValidationError as exc:
        lines = [f"{shown}: {_format_loc(err['loc'])}: {_format_msg(err)}" for err in exc.errors()]
        raise ConnectorSpecError("\n".join(lines)) from exc
    problems = list(_semantic_problems(spec))
    if problems:
        raise ConnectorSpecError("\n".join(f"{shown}: {key}: {msg}" for key, msg in problems))
    return spec


def load_specs(directory: str | Path | None = None) -> dict[str, ConnectorSpec]:
    """Load every ``*.yaml``/``*.yml`` spec of a directory, keyed by spec ``name``.

    Raises:
        ConnectorSpecError: for the first invalid file (all of its problems listed), or when two
            files use the same ``name`` or ``topic_prefix``.
    """
    base = Path(directory) if directory is not None else spec_dir()
    specs: dict[str, ConnectorSpec] = {}
    prefixes: dict[str, Path] = {}
    for file in sorted(f for f in base.iterdir() if f.suffix in SPEC_SUFFIXES and f.is_file()):
        spec = load_spec(file)
        if spec.name in specs:
            raise ConnectorSpecError(
                f"{_display_path(file)}: name: {spec.name!r} is already used by {specs[spec.name].describe()}"
            )
        if spec.topic_prefix in prefixes:
            raise ConnectorSpecError(
                f"{_display_path(file)}: topic_prefix: {spec.topic_prefix!r} is already used by "
                f"{_display_path(prefixes[spec.topic_prefix])}"
            )
        specs[spec.name] = spec
        prefixes[spec.topic_prefix] = file
    return specs


# ---- semantic (cross-field) checks -------------------------------------------------------------


def _semantic_problems(spec: ConnectorSpec) -> Iterable[tuple[str, str]]:
    kind = spec.connector
    seen: set[str] = set()
    for i, table in enumerate(spec.tables):
        key = f"tables[{i}].name"
        yield from ((key, msg) for msg in _collection_problems(spec, table.name))
        if table.name in seen:
            yield key, f"{table.name!r} is listed twice"
        seen.add(table.name)
        if table.name == spec.signal_table:
            yield key, "the signal table must not be listed under tables; it is captured automatically"
    yield from (("signal_table", msg) for msg in _collection_problems(spec, spec.signal_table))

    if spec.snapshot_mode not in SNAPSHOT_MODES[kind]:
        yield "snapshot_mode", f"must be one of {', '.join(sorted(SNAPSHOT_MODES[kind]))} for the {kind} connector"
    if SignalChannel.SOURCE not in spec.signal_channels:
        yield (
            "signal_channels",
            "must include 'source': Debezium needs the signal table for incremental-snapshot watermarking",
        )
    if len(set(spec.signal_channels)) != len(spec.signal_channels):
        yield "signal_channels", "lists a channel twice"
    if spec.signal_kafka_topic and SignalChannel.KAFKA not in spec.signal_channels:
        yield "signal_kafka_topic", "is set but the 'kafka' signal channel is not enabled"

    if spec.server_id is not None and kind not in (ConnectorKind.MYSQL, ConnectorKind.MARIADB):
        yield "server_id", "only applies to the mysql and mariadb connectors"
    for key in ("slot_name", "publication_name"):
        if getattr(spec, key) is not None and kind is not ConnectorKind.POSTGRESQL:
            yield key, "only applies to the postgresql connector"
    if spec.connection_options and kind is not ConnectorKind.MONGODB:
        yield "connection_options", "only applies to the mongodb connector"
    if spec.schema_name is not None and kind is ConnectorKind.MONGODB:
        yield "schema", "does not apply to the mongodb connector"

    yield from _extra_problems(spec)


def _collection_problems(spec: ConnectorSpec, name: str) -> Iterable[str]:
    kind = spec.connector
    expected = DATA_COLLECTION_PARTS[kind]
    parts = name.split(".")
    shape = {
        ConnectorKind.POSTGRESQL: "schema.table",
        ConnectorKind.MYSQL: "database.table",
        ConnectorKind.MARIADB: "database.table",
        ConnectorKind.MONGODB: "database.collection",
        ConnectorKind.INFORMIX: "database.owner.table",
    }[kind]
    part_re = _MONGO_PART if kind is ConnectorKind.MONGODB else _PART
    if len(parts) != expected or not all(part_re.match(part) for part in parts):
        yield f"{name!r} is not a {kind} data collection; write it as {shape}"
        return
    if kind is ConnectorKind.POSTGRESQL:
        if spec.schema_name is not None and parts[0] != spec.schema_name:
            yield f"{name!r} is not in schema {spec.schema_name!r}"
    elif parts[0] != spec.database:
        yield f"{name!r} is not in database {spec.database!r}"
    if kind is ConnectorKind.INFORMIX and spec.schema_name is not None and parts[1] != spec.schema_name:
        yield f"{name!r} is not owned by {spec.schema_name!r}"


def _extra_problems(spec: ConnectorSpec) -> Iterable[tuple[str, str]]:
    generated = generated_keys(spec)
    for key, value in spec.extra.items():
        if key in generated and key not in spec.extra_overrides:
            yield (
                f"extra.{key}",
                "overrides a generated property; add it to extra_overrides if that is intended",
            )
        if _SECRET_KEY.search(key) and not (isinstance(value, str) and CONFIG_PROVIDER_REFERENCE.match(value)):
            yield f"extra.{key}", "looks like a secret; use a config-provider reference such as ${env:VAR}"
    for i, key in enumerate(spec.extra_overrides):
        if key not in spec.extra:
            yield f"extra_overrides[{i}]", f"{key!r} is not a key of extra"


# ---- error formatting --------------------------------------------------------------------------


def _format_loc(loc: Sequence[int | str]) -> str:
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += ("." if out else "") + str(part)
    return out or "<root>"


def _format_msg(err: ErrorDetails) -> str:
    kind = err["type"]
    ctx = err.get("ctx") or {}
    if kind == "enum" and "expected" in ctx:
        expected = str(ctx["expected"]).replace("'", "").replace(" or ", ", ")
        return f"must be one of {expected}"
    if kind == "missing":
        return "required key is missing"
    if kind == "extra_forbidden":
        return "unknown key"
    msg = err["msg"]
    return msg.removeprefix("Value error, ")


def _display_path(path: Path) -> str:
    try:
        return str(path.resolve().relative_to(project_home()))
    except (ValueError, CdcError):
        return str(path)
