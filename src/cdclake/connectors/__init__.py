"""Declarative connector specs (``include/connectors/*.yaml``) and their Kafka Connect configs.

Public API::

    spec = load_spec("postgres")                  # or a path; errors name file + key path
    specs = load_specs()                          # every spec of <project>/include/connectors
    config = connect_config(spec, DatabaseEndpoint(host="127.0.0.1", port=5432))
"""

from __future__ import annotations

from cdclake.connectors.config import (
    DatabaseEndpoint,
    connect_config,
    derive_server_id,
    derive_slot_name,
    generated_keys,
    regex_literal,
)
from cdclake.connectors.loader import SPEC_DIR_RELATIVE, load_spec, load_specs, parse_spec, resolve_spec_path, spec_dir
from cdclake.connectors.spec import (
    CONNECTOR_CLASSES,
    ConnectorKind,
    ConnectorSpec,
    ConverterOptions,
    LakeMode,
    LakeOptions,
    PartitionField,
    SchemaPolicy,
    SchemaSourceKind,
    SignalChannel,
    TableSpec,
    parse_partition,
)

__all__ = [
    "CONNECTOR_CLASSES",
    "SPEC_DIR_RELATIVE",
    "ConnectorKind",
    "ConnectorSpec",
    "ConverterOptions",
    "SchemaSourceKind",
    "DatabaseEndpoint",
    "LakeMode",
    "LakeOptions",
    "PartitionField",
    "SchemaPolicy",
    "SignalChannel",
    "TableSpec",
    "connect_config",
    "derive_server_id",
    "derive_slot_name",
    "generated_keys",
    "load_spec",
    "load_specs",
    "parse_partition",
    "parse_spec",
    "regex_literal",
    "resolve_spec_path",
    "spec_dir",
]
