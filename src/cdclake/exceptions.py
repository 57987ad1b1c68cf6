"""Every error cdclake raises. Each names what failed and how to fix it.

Record-level errors carry the Kafka coordinates (topic, partition, offset) of the offending record.
"""

from __future__ import annotations


class CdcError(Exception):
    """Base class of every cdclake error."""


class ConfigError(CdcError, ValueError):
    """A configuration value is missing or invalid; the message names the key (and file or env var)."""


class NotInstalledError(CdcError, RuntimeError):
    """A required program, package or jar is not installed; the message says how to install it."""


class StackError(CdcError, RuntimeError):
    """A service of the local stack could not be started, reached or stopped."""


class PortInUseError(StackError):
    """A port the local stack needs is already taken by another process."""
