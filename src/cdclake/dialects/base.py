"""The :class:`Dialect` ABC (what differs between connectors) and its registry keyed by ``source.connector``."""

from __future__ import annotations

import logging
from typing import ClassVar

from cdclake.exceptions import UnsupportedDialectError

logger = logging.getLogger(__name__)

#: Spark type of every element of ``_cdc_position``.
POSITION_ELEMENT_TYPE = "decimal(38,0)"


class Dialect:
    """Connector-specific decoding rules.

    A dialect names the rule that turns the ``source`` block of its connector into an ordering position (the
    envelope decoder's ``Position`` rules, ``jvm/decoder``; see docs/decoding.md) and knows how the connector
    names tables. Everything else (envelope, Connect types) is shared.
    """

    #: ``source.connector`` values this dialect handles.
    connectors: ClassVar[tuple[str, ...]] = ()
    #: The envelope decoder's position rule: ``postgresql``, ``binlog``, ``mongodb`` or ``informix``.
    position_rule: ClassVar[str] = ""
    #: Byte order of ``io.debezium.data.Bits`` values ("little" per the Debezium docs).
    bits_byte_order: ClassVar[str] = "little"
    #: Whether ``__debezium_unavailable_value`` placeholders (unchanged TOASTed values) can occur.
    has_unavailable_placeholder: ClassVar[bool] = False
    #: Whether row images are extended-JSON documents (MongoDB) instead of typed structs.
    document_store: ClassVar[bool] = False

    @property
    def name(self) -> str:
        """The primary connector name."""
        return self.connectors[0]

    def namespace(self, db: str | None, schema: str | None) -> str | None:
        """The middle part of a :class:`~cdclake.decode.TableId` (database or schema, per connector)."""
        return schema or db

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"


_REGISTRY: dict[str, type[Dialect]] = {}


def register_dialect(cls: type[Dialect]) -> type[Dialect]:
    """Class decorator registering a dialect under each of its ``connectors`` names."""
    for connector in cls.connectors:
        _REGISTRY[connector] = cls
    return cls


def registered_connectors() -> tuple[str, ...]:
    """All ``source.connector`` values with a registered dialect, sorted."""
    return tuple(sorted(_REGISTRY))


def get_dialect(connector: str | None) -> Dialect:
    """Return the dialect for a ``source.connector`` value.

    Raises:
        UnsupportedDialectError: when no dialect is registered for ``connector``.
    """
    cls = _REGISTRY.get((connector or "").lower())
    if cls is None:
        raise UnsupportedDialectError(
            f"no dialect for source.connector={connector!r}; supported: {', '.join(registered_connectors())}"
        )
    return cls()
